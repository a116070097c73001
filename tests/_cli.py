"""The command line as the CLI tests run it."""

from dpopt.cli import main


def run(argv, capsys):
    """(exit code, stdout, stderr) of ``dpopt argv`` (paths and numbers as text)."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse: --help (0) and usage errors (2)
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err
