"""Bad input to `kchaos run` ends as one clear line and exit code 254, before any Docker work."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from harness.cli import main


def run(*args: str):
    return CliRunner().invoke(main, ["run", *args])


def flat(result) -> str:
    # rich wraps error lines at the terminal width; the words are what matter.
    return " ".join(result.output.split())


def test_unknown_workload_lists_the_valid_ones():
    r = run("--workload", "bank")
    assert r.exit_code == 254
    assert "unknown workload 'bank'" in flat(r) and "queue" in flat(r)
    assert "Traceback" not in r.output


def test_unknown_nemesis_lists_the_valid_ones():
    r = run("--nemesis", "kill,flood")
    assert r.exit_code == 254
    assert "unknown nemesis 'flood'" in flat(r)
    for name in ("clock", "kill", "packet", "partition", "pause"):
        assert name in flat(r)


@pytest.mark.parametrize(
    ("text", "suffix", "expected"),
    [
        ("time-limit: -3\n", ".yaml", "--time-limit: must be a number between 1 and 604800"),
        ("colour: blue\n", ".yaml", "unknown option 'colour'"),
        ("[1, 2]\n", ".yaml", "expected a mapping"),
        ('{"rate": "fast"}', ".json", "--rate: must be a number"),
        ('{"rate": 1,}', ".json", "not valid JSON"),
        ("a: [\n", ".yaml", "not valid YAML"),
        ("", ".yaml", "is empty"),
    ],
)
def test_invalid_spec_file_is_one_clear_error(tmp_path, text, suffix, expected):
    path = tmp_path / f"spec{suffix}"
    path.write_text(text)
    r = run("--spec", str(path))
    assert r.exit_code == 254, r.output
    assert expected in flat(r)
    assert str(path) in r.output.replace("\n", "")


def test_options_override_the_spec_file(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("time-limit: 99\nseed: 5\nnemesis: kill\n")
    r = run("--spec", str(path), "--seed", "6", "--plan-only")
    assert r.exit_code == 0, r.output
    assert '"seed": 6' in r.output and '"time_limit": 99.0' in r.output
    assert '"fault": "kill"' in r.output


def test_a_run_name_is_a_string_from_options_and_spec_files(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("name: nightly\n")
    assert run("--name", "demo", "--seed", "1", "--plan-only").exit_code == 0
    r = run("--spec", str(path), "--seed", "1", "--plan-only")
    assert r.exit_code == 0, r.output
    assert '"name": "nightly"' in r.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: 5\n")
    assert "--name: must be a string" in flat(run("--spec", str(bad), "--plan-only"))


def test_plan_only_is_byte_identical_for_the_same_seed_and_options():
    args = ("--nemesis", "partition,pause", "--time-limit", "90", "--seed", "42", "--plan-only")
    assert run(*args).output == run(*args).output


def test_no_seed_means_a_random_one_that_is_printed_in_the_plan():
    a, b = run("--plan-only"), run("--plan-only")
    assert '"seed": ' in a.output
    assert a.output != b.output


def test_heal_prints_what_heal_cluster_undid(monkeypatch):
    import clusters.engine
    import nemesis.heal

    healed = []
    monkeypatch.setattr(clusters.engine, "client", lambda: None)
    monkeypatch.setattr(
        nemesis.heal, "heal_cluster", lambda dc: healed.append(dc.cluster) or ["n2: resumed"]
    )
    r = CliRunner().invoke(main, ["heal", "--name", "e2e-gone"])
    assert r.exit_code == 0, r.output
    assert healed == ["e2e-gone"]
    assert "n2: resumed" in r.output and "1 fault(s) undone" in flat(r)


def test_heal_of_a_missing_cluster_is_one_clear_error(monkeypatch):
    import clusters.engine
    import nemesis.heal
    from clusters.errors import ClusterError

    def missing(dc):
        raise ClusterError(f"no cluster '{dc.cluster}' is up")

    monkeypatch.setattr(clusters.engine, "client", lambda: None)
    monkeypatch.setattr(nemesis.heal, "heal_cluster", missing)
    r = CliRunner().invoke(main, ["heal", "--name", "e2e-gone"])
    assert r.exit_code == 254
    assert "no cluster 'e2e-gone' is up" in flat(r) and "Traceback" not in r.output


def test_replay_of_a_directory_without_a_plan_is_a_clear_error(tmp_path):
    r = run("--replay", str(tmp_path))
    assert r.exit_code == 254
    assert "cannot read the plan to replay" in flat(r)


def test_replay_runs_the_stored_plan_byte_for_byte(tmp_path):
    stored = run("--nemesis", "kill,pause", "--time-limit", "60", "--seed", "9", "--plan-only")
    (tmp_path / "plan.json").write_text(stored.output)
    replayed = run("--replay", str(tmp_path), "--plan-only")
    assert replayed.exit_code == 0, replayed.output
    assert replayed.output.endswith(stored.output)


def test_a_zookeeper_ensemble_of_three_is_planned_and_two_is_refused():
    r = run("--topology", "zk", "--zookeepers", "3", "--seed", "1", "--plan-only")
    assert r.exit_code == 0, r.output
    assert '"zookeepers": 3' in r.output
    r = run("--topology", "zk", "--zookeepers", "2", "--seed", "1", "--plan-only")
    assert r.exit_code == 254 and "--zookeepers: must be 1 or 3" in flat(r)


def test_a_migration_on_kafka_4_is_one_clear_error_before_any_docker_work():
    r = run("--topology", "migration", "--version", "4.1", "--plan-only")
    assert r.exit_code == 254, r.output
    assert "topology migration needs ZooKeeper" in flat(r) and "3.x" in flat(r)
    assert "Traceback" not in r.output
