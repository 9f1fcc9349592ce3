"""Which part of the jail's Landlock policy or seccomp filter stops CUDA: each arm is a fresh
process that enters a jail with one mechanism on and a part of it loosened, then initialises
CUDA (GPU machine).

    PYTHONPATH=$PWD/src python3 benchmarks/containment/jail_cuda_bisect.py
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

ARM = r"""
import dataclasses, sys, tempfile
from tritune.worker import jail, seccomp
arm = sys.argv[1]
base = jail.policy().with_scratch(tempfile.mkdtemp())
off = dataclasses.replace(base, landlock=False, seccomp=False, caps=False)
if arm.startswith("seccomp"):
    for name in arm.split(":")[1:]:
        del seccomp.REFUSED[name]
    policy = dataclasses.replace(off, seccomp=True)
else:
    kind, *rest = arm.split(":")
    read = tuple(p for p in rest if p.startswith("r=")) 
    write = tuple(p for p in rest if p.startswith("w="))
    policy = dataclasses.replace(off, landlock=True, read=base.read + tuple(p[2:] for p in read),
                                 read_write=base.read_write + tuple(p[2:] for p in write))
jail.enter(policy)
import torch
torch.cuda.init()
print("ok", torch.cuda.get_device_name())
"""

ARMS = ["seccomp", "seccomp:sendto:sendmsg:sendmmsg", "seccomp:setsid:setpgid", "seccomp:io_uring_setup:io_uring_enter:io_uring_register",
        "seccomp:ptrace:process_vm_readv:process_vm_writev",
        "landlock", "landlock:w=/",
        "landlock:w=/proc"]


def main() -> None:
    for arm in ARMS:
        done = subprocess.run([sys.executable, "-c", ARM, arm], capture_output=True, text=True, timeout=120)
        said = done.stdout.strip().splitlines()[-1:] or [(done.stderr.strip().splitlines() or ["?"])[-1][:150]]
        print(f"{arm:60s} {said[0]}", flush=True)


if __name__ == "__main__":
    main()
