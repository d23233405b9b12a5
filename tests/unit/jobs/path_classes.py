"""Path classes (issue 32): every command-line option of shardmill and every option of
slurm/render that takes a value declares whether it names a path and of which class (input,
output, report, log directory, or none), so the output rule reaches every written path.

shardmill: the option tables are C arrays inside each command; sm_cli_parse refuses a table with
a string option of no class (exit 1, "declares no path class"), so `shardmill COMMAND --help`
of every command (listed by `shardmill --help`) must exit 0. slurm/render: its argparse parser
(build_parser) is walked, and every action that takes a value must have an entry in ARG_CLASS
with a known class; every written class must map to a `shardmill validate` flag.

Usage: /usr/bin/python3 path_classes.py --shardmill BIN --render slurm/render
"""

import argparse
import importlib.util
import re
import subprocess
import sys
from importlib.machinery import SourceFileLoader

CLASSES = {"none", "input", "output", "report", "log directory"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardmill", required=True)
    ap.add_argument("--render", required=True)
    args = ap.parse_args()
    fails = 0

    def check(ok, what):
        nonlocal fails
        print(("ok   " if ok else "FAIL ") + what, flush=True)
        fails += 0 if ok else 1

    top = subprocess.run([args.shardmill, "--help"], capture_output=True, text=True, timeout=30)
    commands = re.findall(r"^  ([a-z-]+)\s{2,}\S", top.stdout.split("\n\n  --version")[0], re.M)
    check(len(commands) >= 6, f"shardmill --help lists the commands ({commands})")
    for cmd in commands:
        p = subprocess.run([args.shardmill, cmd, "--help"], capture_output=True, text=True,
                           timeout=30)
        check(p.returncode == 0 and "declares no path class" not in p.stderr,
              f"shardmill {cmd} --help: every string option declares a path class "
              f"({p.returncode}: {p.stderr.strip()[:160]})")

    loader = SourceFileLoader("shardmill_render", args.render)
    spec = importlib.util.spec_from_loader("shardmill_render", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    parser = mod.build_parser()
    takes_value = [a for a in parser._actions
                   if a.nargs != 0 and not isinstance(a, argparse._HelpAction)]
    check(len(takes_value) >= 15, f"render: {len(takes_value)} options take a value")
    for a in takes_value:
        cls = mod.ARG_CLASS.get(a.dest)
        check(cls in CLASSES, f"render {'/'.join(a.option_strings) or a.dest}: class {cls!r}")
    for dest, cls in mod.ARG_CLASS.items():
        check(any(a.dest == dest for a in takes_value), f"render ARG_CLASS {dest}: an option")
        if cls in ("output", "report", "log directory"):
            check(cls in mod.VALIDATE_FLAG and dest in mod.OPTION_NAME,
                  f"render {dest} ({cls}): checked through `shardmill validate "
                  f"{mod.VALIDATE_FLAG.get(cls)}`")
    print(f"{fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
