"""How a command reports what a user can cause (a missing file, no network): one line, no traceback."""


def describe_error(error: BaseException) -> str:
    """An error's message on one line; for a file error, the file and what went wrong."""
    if isinstance(error, OSError) and error.filename and error.strerror:
        return f"{error.filename}: {error.strerror}"
    return " ".join(str(error).split()) or type(error).__name__
