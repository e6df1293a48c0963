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

Stages (input `stage`): the token never shares a job with model code.
  check      check -> minify (-> bisect): the GPU job, which holds no credential at all (refused
             otherwise); upload the run directory
  report     (merge shard run directories, then) report: issues: write, no GPU, no model code
  known      the open issues' verified repros into known.json, for the check job (issues: read)
  authorize  for `/minify` comments: parse, check permission, pin the head SHA, acknowledge
  all        check -> minify -> report in this job into a local issue directory; no credential
The reusable workflow .github/workflows/sweep.yml runs known, check and report as jobs.

Events: schedule, workflow_dispatch and push sweep and file issues; pull_request sweeps and answers
in the pull request; issue_comment handles `/minify` comments.

Model code never runs next to a credential: code of the same user reads whatever its job holds
(/proc/<pid>/environ of its ancestors, the checkout's .git/config), so stages check and all refuse
to start while the step holds one, and stages run with none of the runner's file commands in
their environment. Whatever goes wrong ends with exit 2 (bad input) or 3 (internal/infrastructure),
outputs and a summary, and on /minify an answer in the pull request; exit 1 only ever means
"failures found".
"""
