"""The issue names the culprit op in its title and shows it with the bisector's answer."""

from __future__ import annotations

from tests.ghstub.rundir import check_row, failure_record
from tests.test_render import render_for


def test_title_names_the_culprit_and_the_body_shows_it_with_the_bisector(tmp_path):
    c = check_row(model="MobileBertForMaskedLM", status="fail_accuracy", failure_class="accuracy")
    f = failure_record(c)
    f["culprit"] = {"ops": ["aten.relu.default"], "bisect": "lowerings: relu", "method": "compiled-alone"}
    f["repro"]["capture"] = {**(f["repro"].get("capture") or {}), "role": "backward"}
    r, ctx, body, _, _ = render_for(tmp_path, c, f)
    assert "in aten.relu.default" in r.title(ctx)
    assert "### Culprit" in body and "`aten.relu.default`: fails when compiled alone (in the backward graph)" in body
    assert "CompilerBisector: `lowerings: relu`" in body


def test_without_a_culprit_the_section_is_left_out(tmp_path):
    c = check_row(model="m", status="fail_accuracy", failure_class="accuracy")
    f = failure_record(c)
    f["culprit"] = None
    r, ctx, body, _, _ = render_for(tmp_path, c, f)
    assert "### Culprit" not in body
