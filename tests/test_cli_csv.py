"""``--csv`` on every command that reports results (issue #32): a file, or ``-`` for stdout
with the human report on stderr, as ``--json`` does; the CSV holds the JSON's figures."""

import csv
import io
import json

import pytest
from click.testing import CliRunner

from attenio.app.cli import main

COMMANDS = [
    ["schedule", "--preset", "tiny", "--n", "64", "--d", "16"],
    ["golden", "--preset", "tiny", "--n", "32", "--d", "8"],
    ["accuracy", "--preset", "fpga", "--n", "32", "--d", "16", "--dist", "uniform",
     "--scheme", "tensor"],
    ["dataflows", "--preset", "tiny", "--ns", "256", "--ds", "16"],
    ["explore", "--preset", "tiny", "--set", "mac_lines=4", "--n", "256", "--d", "16",
     "--workers", "1"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: a[0])
def test_csv_dash_is_stdout_and_holds_the_json_figures(args):
    res = CliRunner().invoke(main, args + ["--csv", "-"])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert rows and res.stderr.strip()          # the table on stdout, the report on stderr
    data = json.loads(CliRunner().invoke(main, args + ["--json", "-"]).stdout)
    if "metric" in rows[0]:                      # a report: every JSON scalar, by its path
        flat = {r["metric"]: r["value"] for r in rows}
        key = "total_cycles" if args[0] == "schedule" else "max_rel"
        assert flat[key] == str(data[key])
    else:                                        # a table: the JSON's rows
        listed = data.get("rows") or data.get("points") or data.get("results")
        assert listed is None or len(rows) == len(listed)


def test_schedule_csv_lists_the_bursts_it_prints():
    res = CliRunner().invoke(main, ["schedule", "--preset", "tiny", "--n", "64", "--d", "16",
                                    "--csv", "-"])
    flat = {r["metric"]: r["value"] for r in csv.DictReader(io.StringIO(res.stdout))}
    line = next(x for x in res.stderr.splitlines() if "AXI bursts" in x)
    assert f"{int(flat['requests.read']):,} read" in line
    assert f"{int(flat['requests.fetch']):,} program" in line


def test_csv_and_json_cannot_both_be_stdout():
    res = CliRunner().invoke(main, ["schedule", "--preset", "tiny", "--n", "64", "--d", "16",
                                    "--csv", "-", "--json", "-"])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        ("error: csv='-' is invalid with json='-': one of them may go to stdout; give the "
         "other a file name")]


@pytest.mark.parametrize("command", ["schedule", "golden", "accuracy", "simulate", "synth",
                                     "dataflows", "compare", "explore"])
def test_every_reporting_command_takes_csv(command):
    res = CliRunner().invoke(main, [command, "--help"])
    assert "--csv FILE" in res.output and "--json FILE" in res.output
