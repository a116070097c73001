"""The foundation's CLI commands: demo, account, solvers, reproduce dispatch."""

import subprocess
import sys

import pytest

from dpopt.cli import main
from dpopt.privacy import Gaussian, epsilon_of


def test_account_epsilon(capsys):
    assert main(["account", "--noise", "5", "--steps", "100", "--delta", "1e-5"]) == 0
    out = capsys.readouterr().out
    eps = epsilon_of([Gaussian(5.0, 100)], 1e-5)
    assert f"epsilon = {eps:.6g}" in out and "replace-one" in out


def test_account_noise_and_errors(capsys):
    assert main(["account", "--epsilon", "1", "--steps", "50", "--delta", "1e-6"]) == 0
    assert "noise multiplier =" in capsys.readouterr().out
    assert main(["account", "--steps", "50", "--delta", "1e-6"]) == 2
    assert "exactly one of --noise" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:  # argparse, with the library's check_delta
        main(["account", "--noise", "1", "--steps", "5", "--delta", "3"])
    assert exc.value.code == 2 and "delta must be < 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["account", "--noise", "-1", "--steps", "5", "--delta", "1e-5"])


def test_solvers_and_unknown_experiment(capsys):
    assert main(["solvers"]) == 0
    assert "dp-cd" in capsys.readouterr().out
    assert main(["reproduce", "no-such-paper", "--quick"]) == 2
    assert "experiment must be one of" in capsys.readouterr().err


def test_demo_runs_as_installed_command():
    proc = subprocess.run([sys.executable, "-m", "dpopt", "demo", "--runs", "2"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "epsilon spent" in proc.stdout and "dp-cd" in proc.stdout
    assert "replace-one" in proc.stdout


def test_datasets_list_reads_dpopt_data(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("DPOPT_DATA", str(tmp_path))
    monkeypatch.setenv("DPOPT_CACHE", str(tmp_path / "cache"))
    assert main(["datasets", "list"]) == 0
    out = capsys.readouterr().out
    assert "california" in out and "covtype" in out and " yes" not in out
