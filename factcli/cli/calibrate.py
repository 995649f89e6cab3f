"""`factcli calibrate` (registered on factcli.cli.root.app). The work is in factcli.run.calibrate, imported
inside the command so that `factcli --help` stays fast."""

# No `from __future__ import annotations`: typer reads the commands' parameter types as each starts, and
# strings it would compile and evaluate first (as in eval_cmd.py).

from pathlib import Path
from typing import List, Optional

import typer

from factcli.cli.root import DB_HELP, app, fail


@app.command("calibrate")
def calibrate_cmd(
    labels: Optional[Path] = typer.Argument(None, metavar="LABELS", help="Labeled items: .jsonl or .csv with "
                                            "output, label (pass/fail, true/false, yes/no, 1/0) and optionally "
                                            "id, question, reference, context. Default: the config's 'labels:'."),
    config: Optional[Path] = typer.Option(None, "-c", "--config", metavar="FILE", help="YAML file with 'graders:' (assertions "
                                          "to calibrate, each with an optional 'label') and optionally "
                                          "'labels:' and 'description:'."),
    assert_types: List[str] = typer.Option(None, "--assert", metavar="TYPE", help="Calibrate this assertion "
                                           "type (repeatable); factuality when neither -c nor --assert is given."),
    graders: List[str] = typer.Option(None, "--grader", metavar="PROVIDER", help="Run every configuration "
                                      "without its own provider once with this grader (repeatable)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON on stdout (the table and "
                                 "the other lines go to stderr)."),
    output: List[Path] = typer.Option(None, "-o", "--output", metavar="FILE.json",
                                      help="Write the metrics as JSON (.json). Repeatable."),
    max_concurrency: Optional[int] = typer.Option(None, "-j", "--max-concurrency", metavar="N", min=1,
                                                  help="The most grader calls in flight at once, "
                                                  "as eval's -j (default 4)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Neither read nor write the response cache."),
    no_progress_bar: bool = typer.Option(False, "--no-progress-bar", help="Do not show the progress bar."),
    filter_first_n: Optional[int] = typer.Option(None, "--filter-first-n", metavar="N", min=0,
                                                 help="Only the first N labeled items."),
    description: Optional[str] = typer.Option(None, "--description", metavar="TEXT", help="Describe this run."),
    env_file: Optional[Path] = typer.Option(None, "--env-file", metavar="FILE", help="Load environment variables from a "
                                            "dotenv file (variables already set win)."),
    ratings: Optional[str] = typer.Option(None, "--ratings", metavar="RUN", help="Measure a stored run's judge "
                                          "against people's ratings of it (no model call): its model-graded "
                                          "verdicts as predictions, the ratings as labels."),
    benchmark: Optional[str] = typer.Option(None, "--benchmark", metavar="NAME", help="Judge a labeled grounding "
                                            "benchmark instead of a labels file: llm-aggrefact, halubench, "
                                            "huggingface://datasets/OWNER/REPO, a URL or a local .csv/.jsonl/.json "
                                            "(with --columns). Reports balanced accuracy per dataset."),
    split: Optional[str] = typer.Option(None, "--split", metavar="SPLIT", help="The benchmark's split (default: "
                                        "test)."),
    columns: Optional[str] = typer.Option(None, "--columns", metavar="MAP", help="doc=COL,claim=COL,label=COL"
                                          "[,dataset=COL,question=COL,id=COL]: the benchmark's columns."),
    per_dataset: Optional[int] = typer.Option(None, "--per-dataset", metavar="N", min=1, help="N rows of each "
                                              "dataset, half supported and half unsupported (default: all)."),
    seed: Optional[int] = typer.Option(None, "--seed", metavar="N", help="The seed of --per-dataset's sample "
                                       "(default 0)."),
    datasets: Optional[str] = typer.Option(None, "--datasets", metavar="A,B", help="Only these datasets of the "
                                           "benchmark."),
    tune_threshold: Optional[str] = typer.Option(None, "--tune-threshold", metavar="dev", help="Pick the score "
                                                 "threshold with the best balanced accuracy on the dev split, then "
                                                 "report the test split with it."),
    leaderboard: Optional[str] = typer.Option(None, "--leaderboard", metavar="NAME", help="Print this "
                                              "benchmark's published rows (llm-aggrefact, halubench) beside a "
                                              "labeled set of your own, marked as measured on other data."),
    resume: Optional[str] = typer.Option(None, "--resume", metavar="RUN", help="Go on with a stopped calibration: "
                                         "the rows it stored are kept, the others judged."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Load and check everything, print the grader calls and "
                                 "their cost; call nothing."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", min=0, metavar="USD", help="A hard budget, as "
                                             "eval's: no grader call starts that could pass it."),
    db: Optional[str] = typer.Option(None, "--db", metavar="DB", help=DB_HELP),
    no_write: bool = typer.Option(False, "--no-write", help="Do not store this run."),
) -> None:
    """Measure grader configurations against human labels: macro-F1, accuracy, FPR, FNR, F1 of
    each class, Cohen's kappa, the confusion matrix and FActScore's error rate, side by side; or,
    with --benchmark, a judge's balanced accuracy per dataset on LLM-AggreFact, HaluBench or your own
    labeled set, beside the published leaderboard."""
    from factcli.errors import FactcliError
    from factcli.run.calibrate import run_command

    code = 1
    try:
        code = run_command(locals())
    except FactcliError as exc:
        fail(str(exc), exc.exit_code)
    raise typer.Exit(code)
