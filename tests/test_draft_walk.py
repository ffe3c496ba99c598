"""The quick walk ``kinds.prepare`` runs over every draft before its field-by-field checks: it
never passes a draft those checks would refuse, and it passes the ordinary ones."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from loopx.kernel.canonical import INT_MAX, INT_MIN, json_problems
from loopx.kernel.kinds import _plain
from loopx.kernel.tokens import new_token, token_problems

texts = st.one_of(st.text(max_size=12), st.sampled_from(["lpx_", new_token(), "a\ud800b", ""]))
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(INT_MIN - 2, INT_MAX + 2),
    st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=True), texts,
    st.sampled_from([(), b"x", 1j]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(texts, st.integers(0, 3)), inner,
                                            max_size=4)),
    max_leaves=20,
)


def problems(value: Any) -> list[object]:
    return json_problems(value, "") or token_problems(value, "")


@given(values)
def test_the_quick_walk_passes_only_what_the_full_checks_pass(value: Any) -> None:
    if _plain(value):
        assert problems(value) == []
    elif problems(value) == []:
        # the one case it leaves to the full checks: text with the token prefix in it
        assert "lpx_" in repr(value)


def test_too_deep_is_left_to_the_full_checks() -> None:
    deep: Any = "x"
    for _ in range(70):
        deep = [deep]
    assert problems(deep) and not _plain(deep)
    shallow: Any = "x"
    for _ in range(60):
        shallow = {"k": shallow}
    assert not problems(shallow) and _plain(shallow)


def _with_envelope(payload: Any) -> dict[str, Any]:
    return {"todo_id": "t1", "epoch": 1, "payload": payload}


@given(values)
def test_prepare_accepts_only_what_the_whole_envelope_check_accepts(payload: Any) -> None:
    """A draft whose payload skips the envelope's JsonValue walk (it passed the quick walk) is
    accepted only if validating the whole draft, payload included, accepts it too."""
    from loopx.kernel.envelope import Draft
    from loopx.kernel.errors import RecordRejected
    from loopx.kernel.kinds import Author, prepare

    doc = _with_envelope({"event": "note", "detail": {"v": payload}})
    who = Author(goal_id="g", agent_id="a1", lane_role="research_executor",
                 authenticated=True)
    try:
        got = prepare(doc, who, kind="rollout_event_v0")
    except RecordRejected:
        return
    Draft.model_validate(doc)  # raises if the full walk would have refused the payload
    assert got["payload"]["detail"] == {"v": payload}


def test_prepare_names_a_payload_that_is_not_an_object() -> None:
    from loopx.kernel.errors import RecordRejected
    from loopx.kernel.kinds import Author, prepare

    who = Author(goal_id="g", agent_id="a1", lane_role="research_executor")
    try:
        prepare(_with_envelope([1, 2]), who, kind="rollout_event_v0")
    except RecordRejected as exc:
        assert [p.field for p in exc.problems] == ["payload"]
    else:
        raise AssertionError("a list payload was accepted")


def test_record_ids_are_uuid4_hex() -> None:
    import uuid

    from loopx.kernel.kinds import new_record_id

    ids = {new_record_id() for _ in range(200)}
    assert len(ids) == 200
    for rid in ids:
        assert rid.startswith("rec_") and len(rid) == 36
        assert uuid.UUID(rid[4:]).version == 4 and uuid.UUID(rid[4:]).variant == uuid.RFC_4122
