"""unit.arch.jobs_collectives: jobs/ makes no collective call of its own (issue 20; docs/ARCHITECTURE.md
"The pipeline"). The engine agrees on every phase of a run and reduces what the report needs
(`struct sm_run_result`), so jobs/ may call of par.h only what is not a collective: sm_par_init and
sm_par_finalize, rank and size, sm_par_stuck and sm_par_abort (the last resort), and, in
jobs/progress.c alone, the point-to-point progress posts. Any other sm_par_* call (agree, sums,
maxima, broadcasts, gathers, the barrier, and whatever par.h adds later) and any MPI_* identifier or
<mpi.h> in the code of jobs/*.c and jobs/*.h fails, naming the file and line. Comments and strings
are not code (the launcher's environment variables are named OMPI_..., MPI_LOCALNRANKS).

The check first shows on made-up sources that it finds a call and ignores one in a comment or a
string."""

import os
import re
import sys

from shardmill_test.c_source import strip_c as STRIP_C
from shardmill_test.checks import check, summary

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
ALLOWED = {"sm_par_init", "sm_par_finalize", "sm_par_rank", "sm_par_size", "sm_par_stuck",
           "sm_par_abort", "sm_par_active"}
ALLOWED_IN = {"progress.c": {"sm_par_progress_post", "sm_par_progress_poll"}}
PAR_CALL = re.compile(r"(?<![A-Za-z0-9_])(sm_par_[A-Za-z0-9_]+)\s*\(")
MPI_NAME = re.compile(r"(?<![A-Za-z0-9_])(P?MPI_[A-Za-z0-9_]*)")
MPI_INCLUDE = re.compile(r"^\s*#\s*include\s*[<\"]mpi\.h[>\"]", re.M)


def findings(name, text):
    """(line, what) for every collective call or MPI name in the code of one file."""
    code, code_with_strings = STRIP_C(text)
    allowed = ALLOWED | ALLOWED_IN.get(name, set())
    out = []
    for m in PAR_CALL.finditer(code):
        if m.group(1) not in allowed:
            out.append((code.count("\n", 0, m.start()) + 1, m.group(1)))
    for m in MPI_NAME.finditer(code):
        out.append((code.count("\n", 0, m.start()) + 1, m.group(1)))
    for m in MPI_INCLUDE.finditer(code_with_strings):
        out.append((code_with_strings.count("\n", 0, m.start()) + 1, "<mpi.h>"))
    return out


# The check itself: a call is found, a mention in a comment or a string is not.
made_up = ("static void f(void)\n{\n    /* sm_par_agree(st, err) and MPI_Allreduce */\n"
           "    const char *s = \"MPI_LOCALNRANKS sm_par_sum_u64(\";\n"
           "    (void)sm_par_rank();\n    st = sm_par_agree(st, err);\n"
           "    sm_par_max_u64 (&peak, 1, err);\n    MPI_Barrier(comm);\n}\n")
got = findings("job_made_up.c", made_up)
check(got == [(6, "sm_par_agree"), (7, "sm_par_max_u64"), (8, "MPI_Barrier")],
      f"the check finds calls on lines 6-8 and nothing in the comment or string ({got})")
check(findings("progress.c", "x = sm_par_progress_poll(all);\n") == []
      and findings("report.c", "x = sm_par_progress_poll(all);\n") == [(1, "sm_par_progress_poll")],
      "the progress posts are progress.c's only")

jobs = os.path.join(ROOT, "jobs")
names = sorted(n for n in os.listdir(jobs) if n.endswith((".c", ".h")))
check(len(names) > 20, f"jobs/ sources found ({len(names)})")
for name in names:
    with open(os.path.join(jobs, name), encoding="utf-8") as f:
        found = findings(name, f.read())
    check(not found, f"jobs/{name}: no collective call"
          + "".join(f"\n     jobs/{name}:{line}: {what}" for line, what in found))

sys.exit(summary())
