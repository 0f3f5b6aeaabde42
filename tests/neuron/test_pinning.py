"""One NeuronCore per evaluation: the pool, the pinning, and what the sandbox shares with the children."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from engine.evaluator import EvaluationRequest, LocalExecutor
from engine.evaluator.sandbox.guards import GuardAllowances
from engine.evaluator.sandbox.isolation import SandboxExtras, bwrap_arguments
from engine.platforms.nki.neuron import cores
from engine.platforms.nki.neuron.host import HostConfigError, NeuronHost, parse_core_list
from tests.evaluation.conftest import ADD_REFERENCE
from tests.neuron.conftest import LIMITS, add_kernel


def test_two_evaluations_at_once_run_on_two_different_neuroncores(neuron_host) -> None:
    # Each holds its core a second longer than usual, so the two attempts overlap. The pool hands out the
    # lowest free core: had they run one after the other, both would have had core 0.
    kernel = add_kernel({"hold_s": 1.0})
    with LocalExecutor(max_workers=2) as executor:
        results = list(executor.map([EvaluationRequest(kernel, ADD_REFERENCE, backend="neuron", limits=LIMITS)] * 2))
    assert all(r.ok and r.correct for r in results), [r.error_message for r in results]
    by_attempt = {}
    for call in neuron_host.calls():
        if call["call"] in ("baremetal", "benchmark"):
            by_attempt.setdefault(call["attempt"], set()).add(call["NEURON_RT_VISIBLE_CORES"])
    assert sorted(by_attempt.values(), key=sorted) == [{"0"}, {"1"}]  # each child pinned to one core, all along
    # The attempts' artefact directories are named by core, and the two compiled at overlapping times.
    runs = {}
    for call in neuron_host.calls():
        if call["call"] == "baremetal":
            runs.setdefault(call["NEURON_RT_VISIBLE_CORES"], []).append(call["time"])
    assert min(runs["0"]) < max(runs["1"]) and min(runs["1"]) < max(runs["0"])
    # Both cores are free again.
    first = cores.lease_core([0, 1], str(neuron_host.locks), wait_s=0)
    second = cores.lease_core([0, 1], str(neuron_host.locks), wait_s=0)
    assert (first.core, second.core) == (0, 1)
    first.release()
    second.release()


def test_the_pool_hands_out_the_lowest_free_core_and_waits_for_one(tmp_path) -> None:
    locks = str(tmp_path)
    held = [cores.lease_core([0, 1, 2], locks, wait_s=0) for _ in range(3)]
    assert [lease.core for lease in held] == [0, 1, 2]
    with pytest.raises(cores.NoCoreFree, match="all 3 NeuronCores stayed busy for 0.3 s"):
        cores.lease_core([0, 1, 2], locks, wait_s=0.3)
    held[1].release()
    again = cores.lease_core([0, 1, 2], locks, wait_s=0)
    assert again.core == 1
    for lease in (held[0], held[2], again):
        lease.release()


def test_a_core_held_by_another_process_is_not_handed_out(tmp_path) -> None:
    # flock: the pool is shared by every process on the host (web processes, run workers, hardware_check).
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from engine.platforms.nki.neuron import cores
        lease = cores.lease_core([0, 1], {str(tmp_path)!r}, wait_s=0)
        print(lease.core, flush=True)
        time.sleep(30)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "0"
        lease = cores.lease_core([0, 1], str(tmp_path), wait_s=0)
        assert lease.core == 1
        lease.release()
    finally:
        holder.kill()
        holder.wait()
    lease = cores.lease_core([0, 1], str(tmp_path), wait_s=1)  # released with the process that held it
    assert lease.core == 0
    lease.release()


def test_a_quarantined_core_is_skipped_until_its_time_is_up(tmp_path) -> None:
    lease = cores.lease_core([0, 1], str(tmp_path), wait_s=0)
    lease.quarantine(seconds=0.5)
    lease.release()
    other = cores.lease_core([0, 1], str(tmp_path), wait_s=0)
    assert other.core == 1
    other.release()
    time.sleep(0.6)
    back = cores.lease_core([0, 1], str(tmp_path), wait_s=0)
    assert back.core == 0
    back.release()


def test_the_host_settings(tmp_path) -> None:
    assert parse_core_list("0-3,8,10-11") == (0, 1, 2, 3, 8, 10, 11)
    with pytest.raises(HostConfigError, match="ACCELOPT_NEURON_CORES"):
        parse_core_list("0-x")
    for n in (0, 1, 5):
        (tmp_path / f"neuron{n}").write_bytes(b"")
    (tmp_path / "neuronx").write_bytes(b"")
    env = {"ACCELOPT_NEURON_DEV_DIR": str(tmp_path)}
    host = NeuronHost.from_environment("trn1", env)
    assert host.devices() == (0, 1, 5)
    assert host.cores() == (0, 1, 2, 3, 10, 11)  # 2 NeuronCores per trn1 device
    assert NeuronHost.from_environment("trn2", env).cores()[:9] == (0, 1, 2, 3, 4, 5, 6, 7, 8)
    assert NeuronHost.from_environment("trn1", dict(env, ACCELOPT_NEURON_CORES="2-3")).cores() == (2, 3)
    with pytest.raises(HostConfigError, match="ACCELOPT_NEURON_KEEP_ARTEFACTS"):
        NeuronHost.from_environment("trn1", dict(env, ACCELOPT_NEURON_KEEP_ARTEFACTS="maybe"))


def test_the_devices_are_bound_into_dev_before_it_is_made_read_only_and_the_files_before_the_root() -> None:
    extras = SandboxExtras(devices=(("/host/dev/neuron0", "/dev/neuron0"),),
                           read_only=(("/opt/aws/neuron", "/opt/aws/neuron"),),
                           read_write=(("/tmp/artefacts/core0-x", "/accelopt-neuron"),))
    args = bwrap_arguments("/usr/bin/bwrap", 1024, extras)
    dev, bind = args.index("--dev"), args.index("--dev-bind")
    assert args[bind:bind + 3] == ["--dev-bind", "/host/dev/neuron0", "/dev/neuron0"]
    assert dev < bind < args.index("--remount-ro", dev)
    rw = args.index("--bind")
    assert args[rw - 3:rw + 3] == ["--ro-bind", "/opt/aws/neuron", "/opt/aws/neuron",
                                   "--bind", "/tmp/artefacts/core0-x", "/accelopt-neuron"]
    scratch = len(args) - 1 - args[::-1].index("--tmpfs")
    assert scratch < rw < args.index("--chdir") and args[-2:] == ["--remount-ro", "/"]
    # Everything else is the sandbox as it always is.
    shared = args[bind:bind + 3] + args[rw - 3:rw + 3]
    assert [a for i, a in enumerate(args) if not (bind <= i < bind + 3 or rw - 3 <= i < rw + 3)] == \
        bwrap_arguments("/usr/bin/bwrap", 1024)
    assert len(shared) == 9


_GUARD_PROBE = textwrap.dedent("""
    import json, os, subprocess, sys
    from engine.evaluator.sandbox.guards import GuardAllowances, install_audit_guard
    allowed = json.loads(sys.argv[1])
    install_audit_guard([sys.prefix, sys.base_prefix], GuardAllowances(**{k: tuple(v) if isinstance(v, list) else v
                                                                         for k, v in allowed.items()}))
    outcome = {}
    def attempt(name, action):
        try:
            action()
            outcome[name] = "allowed"
        except PermissionError as exc:
            outcome[name] = "refused"
    scratch, outside = sys.argv[2], sys.argv[3]
    attempt("write in the artefacts", lambda: open(os.path.join(scratch, "kernel.neff"), "w").close())
    attempt("mkdir in the artefacts", lambda: os.mkdir(os.path.join(scratch, "work")))
    attempt("chmod in the artefacts", lambda: os.chmod(os.path.join(scratch, "kernel.neff"), 0o755))
    attempt("write elsewhere", lambda: open(os.path.join(outside, "x"), "w").close())
    attempt("chmod elsewhere", lambda: os.chmod(outside, 0o777))
    attempt("start neuron-bench", lambda: subprocess.run(["neuron-bench"], capture_output=True))
    attempt("start a shell", lambda: subprocess.run(["sh", "-c", "true"], capture_output=True))
    print(json.dumps(outcome))
""")


@pytest.mark.parametrize("with_allowances", [True, False])
def test_the_guard_lets_the_sdk_write_its_files_and_start_its_tools_and_nothing_else(tmp_path, with_allowances) -> None:
    scratch, outside, bin_dir = tmp_path / "artefacts", tmp_path / "outside", tmp_path / "bin"
    for directory in (scratch, outside, bin_dir):
        directory.mkdir()
    tool = bin_dir / "neuron-bench"
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    allowances = {"write_roots": [str(scratch)], "executables": ["neuron-bench"]} if with_allowances else {}
    done = subprocess.run([sys.executable, "-c", _GUARD_PROBE, json.dumps(allowances), str(scratch), str(outside)],
                          capture_output=True, text=True, env={"PATH": f"{bin_dir}:/usr/bin:/bin"}, cwd="/",
                          check=True)
    outcome = json.loads(done.stdout)
    expected = "allowed" if with_allowances else "refused"
    assert outcome == {"write in the artefacts": expected, "mkdir in the artefacts": expected,
                       "chmod in the artefacts": expected if with_allowances else "refused",
                       "write elsewhere": "refused", "chmod elsewhere": "refused", "start neuron-bench": expected, "start a shell": "refused"}
    assert GuardAllowances().executables == ()
