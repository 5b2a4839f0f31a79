"""What every command run shares: signals (one stop-signal policy: SIGINT, SIGTERM and SIGHUP run the same
cleanup; steps that must not be cut in two hold them) and scratch (scratch files beside their targets,
named after the writing process, swapped into place and cleaned up after a killed run)."""
