"""Run a tests/interop/js script with node, failing clearly when node or node_modules is missing.

Usage: /usr/bin/python3 run_node.py NODE SCRIPT.mjs [ARGS...]
CI must run the zarrita.js tests, so a missing peer is a failure with the fix in the message,
never a silent skip.
"""

import os
import subprocess
import sys

JS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")


def main(argv):
    node, script, args = argv[1], argv[2], argv[3:]
    if not node or node.endswith("NOTFOUND") or not os.path.exists(node):
        print("FAIL: node not found (configure with SM_NODE=/path/to/node); "
              "run scripts/install-deps.sh")
        return 1
    mod = os.path.join(JS_DIR, "node_modules", "zarrita", "package.json")
    if not os.path.exists(mod):
        print(f"FAIL: {os.path.dirname(mod)} missing: run scripts/install-deps.sh "
              f"(it runs `npm ci --prefix tests/interop/js`)")
        return 1
    return subprocess.call([node, os.path.join(JS_DIR, script)] + args)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
