"""The Action's entry point: read inputs and event, dispatch ``(event, stage)`` to one handler,
and always end with outputs, a summary and an exit code (see bot/action/__init__.py).

    ROUTES[(event_kind(ctx), stage)] -> handler(ctx, run) -> exit code

Event kinds: "comment" (issue_comment: /minify), "sweep" (schedule, push, pull_request, ...) and
"other" (nothing to do). Each handler composes the concern modules: stages (check / minify /
report in their own processes), authorize (the /minify flow), sticky (the results comment),
summary (outputs and the job summary).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from bot import gha, rundir, slash
from bot.action import authorize, harden, sticky, summary
from bot.action.context import Context, PRContext, default_out
from bot.action.inputs import STAGES, TOKEN_STAGES, Inputs
from bot.action.pullrequest import pr_context, react
from bot.action.results import load
from bot.action.stages import (
    Runner,
    guard_model_code,
    merge_shards,
    stage_check,
    stage_known,
    stage_report,
    verify_checkout,
)
from bot.errors import EXIT_FAILURES, EXIT_INTERNAL, EXIT_OK, BotError, InfraError, Interrupted, UsageError
from bot.records import ReportDoc, ResultsDoc

SWEEP_EVENTS = ("schedule", "workflow_dispatch", "push", "pull_request", "pull_request_target", "repository_dispatch")
PR_EVENTS = ("pull_request", "pull_request_target")
JOB_TOKEN = "MINIFY_JOB_TOKEN"   # action.yml: the job's token, set for stages report, authorize and known only


def event_kind(ctx: Context) -> str:
    name = ctx.event.name
    return "comment" if name == "issue_comment" else "sweep" if name in SWEEP_EVENTS else "other"


# ---------------------------------------------------------------- /minify comments (issue_comment)


def comment_authorize(ctx: Context, run) -> int:
    """Stage authorize: parse, check permission, pin the head SHA, acknowledge; outputs the request."""
    _authorize(ctx)
    return EXIT_OK


def _authorize(ctx: Context) -> tuple[slash.MinifyRequest, PRContext] | None:
    _cmd, request, prc = authorize.handle_comment(ctx)
    ctx.summary += ["## minify-bot: /minify", ""]
    if request is None:
        ctx.summary += [f"- {gha.md_escape(n, 300)}" for n in ctx.notes] or ["_Nothing to do._"]
        ctx.output("authorized", ctx.outputs.get("authorized", "false"))
        return None
    ctx.summary.append(f"- {sticky.requested_line(request)} at `{request.sha[:12]}`")
    return request, prc


def comment_all(ctx: Context, run) -> int:
    """Stage all on a /minify comment: refused. Answering needs a token and checking runs the pull
    request's code, which never share a job."""
    raise UsageError("stage `all` runs model code and holds no token: /minify comments run in the "
                     "authorize, check and report jobs of .github/workflows/minify-comment.yml (docs/action.md)")


def comment_check(ctx: Context, run) -> int:
    """Stage check on a /minify comment: the GPU job, no token; checks the pinned head commit."""
    i = ctx.inputs
    guard_model_code(ctx)
    request = authorize.request_input(ctx)
    if i.expected_sha or request:
        verify_checkout(ctx, i.expected_sha or request.sha)
    with ctx.cmds.group("settings"):
        print(f"/minify request: {request.command().describe()}" if request else "no request")
    rc = stage_check(ctx, run, request.command() if request else None)
    results = load(ctx.out / rundir.RESULTS)
    summary.result_outputs(ctx, results, None)
    summary.summary_results(ctx, results, None, "minify-bot: checks of the pull request")
    return summary.exit_for(ctx, results) if rc in (EXIT_OK, EXIT_FAILURES) else rc


def comment_report(ctx: Context, run) -> int:
    """Stage report on a /minify comment: answer with the check job's results."""
    request = authorize.request_input(ctx)
    if request is None:
        raise UsageError("stage `report` on a /minify comment needs the `request` input from the authorize step")
    prc = pr_context(ctx, request.pr, request.comment_id)
    ctx.prc, ctx.requester = prc, request.requested_by
    return _comment_report(ctx, run, request, prc)


def _comment_report(ctx: Context, run, request: slash.MinifyRequest, prc: PRContext) -> int:
    from bot import pr

    if ctx.inputs.stage == "report":
        if ctx.inputs.check_result and ctx.inputs.check_result != "success" and not ctx.inputs.shards:
            react(ctx, prc, pr.REACTION_REJECTED)
            sticky.post(ctx, prc, request, None, None,
                        problem=f"the check job ended with `{ctx.inputs.check_result}`; no results")
            raise InfraError(f"the check job ended with {ctx.inputs.check_result}")
        try:
            results = merge_shards(ctx)
        except UsageError as exc:
            react(ctx, prc, pr.REACTION_REJECTED)
            sticky.post(ctx, prc, request, None, None, problem=f"the results artifact was rejected: {exc}")
            raise
        if results is None:
            react(ctx, prc, pr.REACTION_REJECTED)
            sticky.post(ctx, prc, request, None, None, problem="the check job produced no results")
            raise InfraError("no results to report")
    report = stage_report(ctx, run, file_issues=ctx.inputs.pr_issues, pr_run=True)
    results = load(ctx.out / rundir.RESULTS)
    sticky.post(ctx, prc, request, results, report)
    react(ctx, prc, pr.REACTION_SUCCESS)
    summary.result_outputs(ctx, results, report)
    summary.summary_results(ctx, results, report, "minify-bot: /minify results")
    return summary.exit_for(ctx, results)


# ---------------------------------------------------------------- sweeps (schedule, push, pull_request, ...)


def sweep_all(ctx: Context, run) -> int:
    """check -> minify -> report in this job."""
    _sweep_check(ctx, run)
    return _sweep_report(ctx, run)


def sweep_check(ctx: Context, run) -> int:
    """check -> minify only (a GPU job with a read-only token); the run directory is the artifact."""
    _sweep_check(ctx, run)
    return _sweep_end(ctx, load(ctx.out / rundir.RESULTS), None)


def sweep_report(ctx: Context, run) -> int:
    """(merge shard run directories, then) report: a job with issues: write and no GPU."""
    merge_shards(ctx)
    return _sweep_report(ctx, run)


def sweep_authorize(ctx: Context, run) -> int:
    raise UsageError("stage `authorize` is for issue_comment events")


def known(ctx: Context, run) -> int:
    """Stage known (any event): the open issues' verified repros into known.json for the check job."""
    return stage_known(ctx)


def _sweep_check(ctx: Context, run) -> None:
    try:
        guard_model_code(ctx)
    except UsageError as exc:
        if ctx.event.name in PR_EVENTS and ctx.inputs.stage == "all":
            sticky.problem_for_event(ctx, str(exc))
        raise
    if ctx.inputs.expected_sha:
        verify_checkout(ctx, ctx.inputs.expected_sha)
    stage_check(ctx, run)


def _sweep_report(ctx: Context, run) -> int:
    is_pr = ctx.event.name in PR_EVENTS
    report = stage_report(ctx, run, file_issues=not is_pr, pr_run=is_pr)
    results = load(ctx.out / rundir.RESULTS)
    if is_pr:
        sticky.post_for_event(ctx, results, report)
    return _sweep_end(ctx, results, report)


def _sweep_end(ctx: Context, results: ResultsDoc | None, report: ReportDoc | None) -> int:
    summary.result_outputs(ctx, results, report)
    summary.summary_results(ctx, results, report,
                            "minify-bot results" + (f" (shard {ctx.inputs.shard})" if ctx.inputs.shard else ""))
    return summary.exit_for(ctx, results)


# ---------------------------------------------------------------- anything else


def unhandled(ctx: Context, run) -> int:
    ev = ctx.event
    ctx.notes.append(f"event {ev.name!r} is not handled; nothing to do")
    ctx.summary += ["## minify-bot", "", f"_Nothing to do for a {gha.md_escape(ev.name, 50)} event._", ""]
    return EXIT_OK


ROUTES = {
    ("comment", "all"): comment_all,
    ("comment", "authorize"): comment_authorize,
    ("comment", "check"): comment_check,
    ("comment", "report"): comment_report,
    ("sweep", "all"): sweep_all,
    ("sweep", "check"): sweep_check,
    ("sweep", "report"): sweep_report,
    ("sweep", "authorize"): sweep_authorize,
    **{("other", stage): unhandled for stage in STAGES},
    **{(kind, "known"): known for kind in ("comment", "sweep", "other")},
}


def execute(ctx: Context) -> int:
    runner = Runner(ctx)
    try:
        return ROUTES[(event_kind(ctx), ctx.inputs.stage)](ctx, runner)
    finally:
        if runner.ran_model_code:
            _upload_copy(ctx)


def _upload_copy(ctx: Context) -> None:
    """Output ``upload-dir``: the run directory as upload-artifact may carry it (bot/action/harden.py),
    made after every process of the model-code stages has ended."""
    if not ctx.out.is_dir():
        return
    base = Path(ctx.env.get("RUNNER_TEMP") or ctx.out.parent)
    dest, left_out = harden.upload_copy(ctx.out, base)
    ctx.output("upload-dir", str(dest))
    if left_out:
        shown = ", ".join(left_out[:10]) + (f" and {len(left_out) - 10} more" if len(left_out) > 10 else "")
        ctx.notes.append(f"not uploaded (not regular files of the run-directory layout): {gha.md_escape(shown)}")


# ---------------------------------------------------------------- entry point


def run(args) -> int:
    env = dict(os.environ)
    cmds = gha.Commands()
    started = time.monotonic()
    ctx: Context | None = None
    code = EXIT_INTERNAL
    try:
        inputs = Inputs.read(env)
        if args.stage:
            inputs.stage = args.stage
        if args.dry_run:
            inputs.dry_run = True
        if inputs.stage in TOKEN_STAGES and not inputs.token:
            # the job's token, which action.yml hands only to the stages that run no model code
            inputs.token = env.get(JOB_TOKEN, "")
        # short values are not secrets worth masking: masking `1` would turn outputs into `***`
        secrets = [s for s in dict.fromkeys([inputs.token, *gha.secret_like_env(env).values()]) if gha.is_maskable(s)]
        for s in secrets:
            cmds.add_mask(s)
        event = gha.read_event(env)
        workdir = Path(env.get("GITHUB_WORKSPACE") or os.getcwd())
        if inputs.working_directory:
            workdir = workdir / inputs.working_directory
            if not workdir.is_dir():
                raise UsageError(f"input 'working-directory': {inputs.working_directory} is not a directory")
        out = Path(inputs.out) if inputs.out else default_out(env)
        if not out.is_absolute():
            out = workdir / out
        ctx = Context(env=env, inputs=inputs, event=event, cmds=cmds, workdir=workdir, out=out, secrets=secrets)
        ctx.output("run-dir", str(out))
        harden.preload()   # nothing the action runs after a stage is read from disk after model code ran
        try:
            code = execute(ctx)
        except KeyboardInterrupt:   # this process's own SIGINT (a cancelled run): as a stage's
            raise Interrupted("interrupted; nothing more runs and nothing is reported (what was finished "
                              "is kept in the run directory)") from None
    except BotError as exc:
        usage = isinstance(exc, UsageError)
        reason = gha.redact(str(exc), ctx.secrets if ctx else [])
        cmds.error(reason, title="minify-bot: bad input" if usage else "minify-bot: error")
        code = exc.exit_code
        label = "Bad input" if usage else "Interrupted" if isinstance(exc, Interrupted) else "Error"
        summary.summarize_failure(ctx, env, f"❌ **{label}:** {gha.md_escape(reason, 1000)}")
        authorize.answer_failure(ctx, reason)
        summary.finish(ctx, env, code, started)
        raise
    except Exception as exc:  # noqa: BLE001 - a bug or input nobody foresaw: exit 3, never a traceback
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        reason = gha.redact(f"internal error: {type(exc).__name__}: {first_line}"[:500], ctx.secrets if ctx else [])
        cmds.error(reason, title="minify-bot: internal error")
        code = EXIT_INTERNAL
        summary.save_traceback(ctx)
        summary.summarize_failure(ctx, env, f"❌ **Internal error:** {gha.md_escape(reason, 1000)} "
                                            "(details in action-error.txt in the run directory)")
        authorize.answer_failure(ctx, "an internal error stopped it")
        summary.finish(ctx, env, code, started)
        raise InfraError(reason) from None
    summary.finish(ctx, env, code, started)
    return code
