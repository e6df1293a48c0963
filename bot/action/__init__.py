"""The GitHub Action (what action.yml runs as `minify-bot action`), one module per concern:

    inputs.py       INPUT_* variables -> Inputs (checked once)
    context.py      what one step knows and has said: Context, warnings
    main.py         the entry point and the (event, stage) -> handler table
    stages.py       check / minify / report in their own processes (the token policy), merge
    results.py      reading results.json and report.json back
    summary.py      step outputs, the job summary (templates/action_*.md.j2), the exit code
    authorize.py    the /minify comment flow: parse, permission, pinned head, acknowledgement
    pullrequest.py  the pull request handle: reactions and replies
    sticky.py       the results comment on a pull request, updated in place
    ownership.py    handing the run directory back to the workspace's owner (container jobs)

Stages (input `stage`), so one workflow can split privileges over several jobs:
  all        check -> minify -> report in this job (default)
  check      check -> minify only: for a GPU job with a read-only token; upload the run directory
  report     (merge shard run directories, then) report: for a job with issues: write and no GPU
  authorize  for `/minify` comments: parse, check permission, pin the head SHA, acknowledge

Events: schedule, workflow_dispatch and push sweep and file issues; pull_request sweeps and answers
in the pull request; issue_comment handles `/minify` comments.

Model code never runs next to a token where the code is untrusted (issue_comment,
pull_request_target, fork pull_request): scrubbing a child's environment is no boundary, since code
of the same user reads /proc/<pid>/environ of its ancestors. Whatever goes wrong ends with exit 2
(bad input) or 3 (internal/infrastructure), outputs and a summary, and on /minify an answer in the
pull request; exit 1 only ever means "failures found".
"""
