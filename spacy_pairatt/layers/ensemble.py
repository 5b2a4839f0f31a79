"""A tagging head made of several independently trained members whose class probabilities are averaged.

For the UD pipeline's senter: sentence starts on the frozen transformer vary by about a point of
sentence F from one training seed to the next, and averaging members trained from different
initialisations removes much of that variance (docs/ud_pipeline.md#six-heads-averaged).
The members share the listener's vectors (a frozen transformer's output, read once per batch);
each has its own spelling features, maxout layer, BiLSTM and softmax.

Training the average with the component's own loss would tie the members together: spaCy's
tagger and senter pass back `d = p̄ - y` (cross-entropy on the softmax output, here the mean p̄),
and every member would receive the ensemble's error. Each member receives its own cross-entropy
gradient `p_k - y = d + (p_k - p̄)` instead, on the tokens the loss annotates (non-zero rows of
`d`), so one `spacy train` trains the members as separate runs would, and only prediction
averages them.
"""

from typing import List, Optional, Sequence, Tuple

from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Model, Softmax_v2, chain, with_array, zero_init
from thinc.types import Floats2d

from ..integration.validation import check_settings
from .surface import build_dropout_bilstm_encoder, handing_on_no_input_gradient, surface_embedding, surface_mix

OWNER = "spacy-pairatt.TaggerEnsemble.v1"


@registry.architectures("spacy-pairatt.TaggerEnsemble.v1")
def build_tagger_ensemble(
    tok2vec: Model[List[Doc], List[Floats2d]],
    members: int = 6,
    surface_width: int = 64,
    attrs: Sequence[str] = ("NORM", "PREFIX", "SUFFIX", "SHAPE"),
    rows: Sequence[int] = (5000, 1000, 2500, 1000),
    width: int = 256,
    depth: int = 1,
    nO: Optional[int] = None,
) -> Model[List[Doc], List[Floats2d]]:
    """Registered as `spacy-pairatt.TaggerEnsemble.v1`: the mean class probabilities of `members` heads.

    tok2vec: the listener, shared; each member: the hashed embedding of `attrs` (`surface_width`,
    `rows`), a maxout layer of `width` over it and the listener's vectors, a BiLSTM
    (`spacy-pairatt.DropoutBiLSTMEncoder.v1`, `width`, `depth`) and a softmax over the `nO` labels
    (zero-initialised, as spaCy's tagger). Use it as a `tagger` or `senter` model.
    """
    check_settings(OWNER, members=members, width=width, depth=depth)
    surfaces = [surface_embedding(OWNER, surface_width, attrs, rows) for _ in range(members)]
    heads = [
        chain(
            with_array(surface_mix(width)),
            build_dropout_bilstm_encoder(width=width, depth=depth),
            with_array(Softmax_v2(nO, width, init_W=zero_init, normalize_outputs=True)),
        )
        for _ in range(members)
    ]
    return ensemble_of(handing_on_no_input_gradient(tok2vec), surfaces, heads, nO)


def ensemble_of(listener: Model, surfaces: List[Model], heads: List[Model], nO: Optional[int]) -> Model:
    return Model(
        "tagger_ensemble",
        ensemble_forward,
        init=ensemble_init,
        layers=[listener, *surfaces, *heads],
        attrs={"members": len(heads)},
        dims={"nO": nO},
    )


def first_members(model: Model, count: int) -> Model:
    """The ensemble of `model`'s first `count` members, sharing their layers and weights: a smaller and
    faster head where averaging fewer members is worth the speed (`segmenter-sweep --members`). Each
    member is trained as a model of its own, so its first members are an ensemble as trained; saved,
    it is the model `TaggerEnsemble.v1` builds with `members = count`."""
    if model.name != "tagger_ensemble":
        raise ValueError(f"the model is {model.name!r}, not {OWNER}'s: only an ensemble has members to keep")
    members = model.attrs["members"]
    if not 1 <= count <= members:
        raise ValueError(f"{OWNER}: cannot keep {count} of its {members} members (1 to {members})")
    listener, surfaces, heads = ensemble_parts(model)
    return ensemble_of(listener, surfaces[:count], heads[:count], model.get_dim("nO") if model.has_dim("nO") else None)


def ensemble_parts(model: Model) -> Tuple[Model, List[Model], List[Model]]:
    """Its listener, its members' spelling features and its members' heads, as `ensemble_of` lays them out."""
    members = model.attrs["members"]
    return model.layers[0], model.layers[1 : 1 + members], model.layers[1 + members :]


def member_inputs(model: Model, docs: List[Doc], is_train: bool):
    """The listener's vectors (once) and, per member, its input: those vectors beside its own spelling features."""
    listener, surfaces, _ = ensemble_parts(model)
    vectors, backprop_listener = listener(docs, is_train)
    spelled = [surface(docs, is_train) for surface in surfaces]
    inputs = [[model.ops.xp.hstack((v, s)) for v, s in zip(vectors, features)] for features, _ in spelled]
    return vectors, backprop_listener, spelled, inputs


def ensemble_forward(model: Model, docs: List[Doc], is_train: bool):
    if not docs:  # thinc's layers cannot infer a width from an empty batch
        return [], lambda d_mean: []
    _, _, heads = ensemble_parts(model)
    vectors, backprop_listener, spelled, inputs = member_inputs(model, docs, is_train)
    results = [head(X, is_train) for head, X in zip(heads, inputs)]
    probabilities = [sum(doc_probs) / len(heads) for doc_probs in zip(*(probs for probs, _ in results))]

    def backprop(d_mean: List[Floats2d]) -> List:
        d_vectors = [model.ops.alloc2f(*v.shape) for v in vectors]
        width = vectors[0].shape[1]  # the listener's columns of each member's input; its own after them
        for (member_probs, backprop_head), (_, backprop_surface) in zip(results, spelled):
            d_member = [
                d + (d != 0).any(axis=1, keepdims=True) * (p - mean)
                for d, p, mean in zip(d_mean, member_probs, probabilities)
            ]
            d_inputs = backprop_head(d_member)
            for d_vector, d_input in zip(d_vectors, d_inputs):
                d_vector += d_input[:, :width]
            backprop_surface([d_input[:, width:] for d_input in d_inputs])
        backprop_listener(d_vectors)
        return []

    return probabilities, backprop


def ensemble_init(model: Model, X: Optional[List[Doc]] = None, Y: Optional[List[Floats2d]] = None) -> None:
    """Each member's layers sized from sample Docs X (their input widths) and labels Y (nO), as spaCy's
    tagger and senter initialise their models."""
    if not X:
        raise ValueError(f"{OWNER}: initialize needs sample Docs (X) to size the members' layers")
    listener, surfaces, heads = ensemble_parts(model)
    listener.initialize(X=X)
    for surface in surfaces:
        surface.initialize(X=X)
    _, _, _, inputs = member_inputs(model, X, is_train=False)
    for head, inputs_k in zip(heads, inputs):
        head.initialize(X=inputs_k, Y=Y)
    model.set_dim("nO", heads[0].get_dim("nO"))
