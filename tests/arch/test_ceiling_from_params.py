"""unit.arch.ceiling_from_params: `run`'s memory ceiling is planned from the engine's parameters
the convert runs with (`struct sm_convert_run`, sm_job_convert_params), not from the configuration
again (issue 36 item 5). `plan`'s estimate and the ceiling's fit (jobs/plan_estimate.c,
jobs/plan_estimate.h, jobs/plan_memory.c) never name the configuration (`struct sm_job_config`):
they take `struct sm_plan_job`, which `plan` fills from the same sm_job_convert_params. The
convert job hands the ceiling's check (`sm_plan_memory_run`) no `c`, and the check takes the
convert's parameters. Comments and strings are not code. `convert.memory_ceiling.*` checks that
the run's check still gives the bound `plan` prints.

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
CEILING_CALL = re.compile(r"(?<!sm_status )(?<![A-Za-z0-9_])sm_plan_memory_run\s*\(")
C_ARG = re.compile(r"(?<![A-Za-z0-9_>.])c(?![A-Za-z0-9_])")
CEILING_DECL = re.compile(r"sm_status\s+sm_plan_memory_run\s*\(\s*const\s+struct\s+(\w+)")


def config_findings(text):
    """(line, what) for every use of the configuration in an estimate file's code."""
    code, _ = STRIP_C(text)
    return [(line_of(code, m.start()), m.group(0)) for m in CONFIG.finditer(code)]


def call_findings(text):
    """(line, what) for every call of the ceiling's check handed `c` (not its declaration)."""
    code, _ = STRIP_C(text)
    return [(line_of(code, m.start()), "sm_plan_memory_run(c, ...)")
            for m in CEILING_CALL.finditer(code) if C_ARG.search(call_args(code, m.end()))]


def decl_types(text):
    """The type of the first parameter of each sm_plan_memory_run declaration or definition."""
    code, _ = STRIP_C(text)
    return [m.group(1) for m in CEILING_DECL.finditer(code)]


# The check itself: a use is found, a mention in a comment or a string is not.
made_up = ("/* a struct sm_job_config here is prose */\n"
           "static const char *s = \"sm_job_config\";\n"
           "sm_status f(const struct sm_job_config *c);\n")
got = config_findings(made_up)
check(got == [(3, "sm_job_config")], f"the check finds the type on line 3 only ({got})")
made_up = ("/* sm_plan_memory_run(c, 1, 1, ...) */\n"
           "st = sm_plan_memory_run(&p, sm_par_size(), p.c.threads, &fit, &io, &docs, err);\n"
           "st = sm_plan_memory_run(c, sm_par_size(), p.c.threads, &fit, &io, &docs, err);\n"
           "sm_status sm_plan_memory_run(const struct sm_job_config *c, int ranks);\n")
got = call_findings(made_up)
check(got == [(3, "sm_plan_memory_run(c, ...)")],
      f"the check finds the call handed c on line 3, not the comment or p.c ({got})")
got = decl_types(made_up)
check(got == ["sm_job_config"], f"the check reads a declaration's first parameter ({got})")

jobs = os.path.join(ROOT, "jobs")


def read(name):
    with open(os.path.join(jobs, name), encoding="utf-8") as f:
        return f.read()


for name in ("plan_estimate.c", "plan_estimate.h", "plan_memory.c"):
    found = config_findings(read(name))
    check(not found, f"jobs/{name}: the estimate and the fit name no configuration"
          + "".join(f"\n     jobs/{name}:{line}: {what}" for line, what in found))
found = call_findings(read("job_convert.c"))
check(not found, "jobs/job_convert.c: the ceiling's check is handed the run's parameters, no c"
      + "".join(f"\n     jobs/job_convert.c:{line}: {what}" for line, what in found))
for name in ("plan_estimate.h", "cmd_plan.c"):
    got = decl_types(read(name))
    check(got == ["sm_convert_run"],
          f"jobs/{name}: sm_plan_memory_run takes the convert's parameters ({got})")

sys.exit(summary())
