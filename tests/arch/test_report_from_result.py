"""unit.arch.report_from_result: the report of a scan or a convert is built from the run result
and the few fields `run` settles (issue 36 item 5; docs/internals/report.md). The report's files
(jobs/report*.c, jobs/report*.h) never name the configuration (`struct sm_job_config`): the
`rates` section takes the result and the output parameters the convert ran with, not the config
again. The scan and convert jobs take where the report goes and the job's name from `run`
(`struct sm_report_to`, cmd_run.c): neither reads `c->report` nor names the job from the config,
and the calls that build and emit the report are handed no `c`. Comments and strings are not
code.

The check first shows on made-up sources that it finds a use and ignores one in a comment or a
string."""

import os
import re
import sys

from shardmill_test.c_source import call_args, line_of
from shardmill_test.c_source import strip_c as STRIP_C
from shardmill_test.checks import check, summary

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
CONFIG = re.compile(r"(?<![A-Za-z0-9_])sm_job_config(?![A-Za-z0-9_])")
JOB_READS = re.compile(r"(?<![A-Za-z0-9_])(c->report(?![A-Za-z0-9_])|sm_config_job_name\s*\()")
REPORT_CALL = re.compile(r"(?<![A-Za-z0-9_])(sm_report_run_emit|sm_report_rates_json)\s*\(")
C_ARG = re.compile(r"(?<![A-Za-z0-9_>.])c(?![A-Za-z0-9_])")


def report_findings(text):
    """(line, what) for every use of the configuration in a report file's code."""
    code, _ = STRIP_C(text)
    return [(line_of(code, m.start()), m.group(0)) for m in CONFIG.finditer(code)]


def job_findings(text):
    """(line, what) for a job that settles the report's path or name itself, or hands c to the
    report's calls."""
    code, _ = STRIP_C(text)
    out = [(line_of(code, m.start()), m.group(1)) for m in JOB_READS.finditer(code)]
    for m in REPORT_CALL.finditer(code):
        if C_ARG.search(call_args(code, m.end())):
            out.append((line_of(code, m.start()), f"{m.group(1)}(c, ...)"))
    return out


# The check itself: a use is found, a mention in a comment or a string is not.
made_up = ("/* a struct sm_job_config here is prose */\n"
           "static const char *s = \"sm_job_config\";\n"
           "json_t *f(const struct sm_job_config *c);\n")
got = report_findings(made_up)
check(got == [(3, "sm_job_config")], f"the check finds the type on line 3 only ({got})")
made_up = ("/* c->report, sm_config_job_name(c->job) */\n"
           "st = sm_report_run_emit(to, true, &r, NULL, sm_report_rates_json(&p->output, &r), err);\n"
           "rp = report_path != NULL ? report_path : c->report;\n"
           "x = sm_report_rates_json(c, &r);\n"
           "y = sm_report_run_emit(sm_config_job_name(c->job), true, rp, &r, NULL, NULL, err);\n")
got = job_findings(made_up)
check(sorted(got) == [(3, "c->report"), (4, "sm_report_rates_json(c, ...)"),
                      (5, "sm_config_job_name("), (5, "sm_report_run_emit(c, ...)")],
      f"the check finds the job's own reads on lines 3-5 and not the comment or p->output ({got})")

jobs = os.path.join(ROOT, "jobs")
reports = sorted(n for n in os.listdir(jobs) if n.startswith("report") and n.endswith((".c", ".h")))
check(len(reports) >= 4, f"jobs/report*.c|h found ({', '.join(reports)})")
for name in reports:
    with open(os.path.join(jobs, name), encoding="utf-8") as f:
        found = report_findings(f.read())
    check(not found, f"jobs/{name}: no configuration"
          + "".join(f"\n     jobs/{name}:{line}: {what}" for line, what in found))
for name in ("job_scan.c", "job_convert.c"):
    with open(os.path.join(jobs, name), encoding="utf-8") as f:
        found = job_findings(f.read())
    check(not found, f"jobs/{name}: the report from the result and `run`'s sm_report_to"
          + "".join(f"\n     jobs/{name}:{line}: {what}" for line, what in found))

sys.exit(summary())
