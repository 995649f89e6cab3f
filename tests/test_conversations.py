"""Multi-turn conversations (`_conversation`, `metadata.conversationId`), `storeOutputAs` and `runSerially`,
against the fake OpenAI server: the exact messages each turn sent, -j independence, --repeat, resume and
retry, and how view / show / the HTML report mark turns (promptfoo-features part B §3)."""

import json
import re
import sqlite3

import pytest
import yaml
from conftest import ROOT, write
from typer.testing import CliRunner

from factcli.cli import app

runner = CliRunner()

CHAT = """[
  {"role": "system", "content": "You are a helpful assistant"},
  {% for completion in _conversation %}
    {"role": "user", "content": {{ completion.input | dump }}},
    {"role": "assistant", "content": {{ completion.output | dump }}},
  {% endfor %}
  {"role": "user", "content": {{ question | dump }}}
]
"""


def provider(model="m1", label=None):
    p = {"id": f"openai:chat:{model}", "config": {"apiBaseUrl": "{{ env.FAKE_OPENAI_URL }}"}}
    if label:
        p["label"] = label
    return p


def ans(request: dict) -> str:
    """The fake model: ANS(<last user message>)."""
    return f"ANS({request['messages'][-1]['content']})"


def config(tmp_path, cfg: dict, chat: bool = False):
    if chat:
        write(tmp_path / "chat.json", CHAT)
    return write(tmp_path / "c.yaml", yaml.safe_dump(cfg, sort_keys=False))


def run(*args):
    return runner.invoke(app, ["eval", "--no-progress-bar", "--no-cache", *map(str, args)])


def rows(out) -> dict:
    doc = json.loads(out.read_text())
    return {(r["testIdx"], r["promptIdx"]): r for r in doc["results"]["results"]}


def sent(server) -> list[list[tuple[str, str]]]:
    return [[(m["role"], m["content"]) for m in r["json"]["messages"]] for r in server.requests
            if r["json"] and "messages" in r["json"]]


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


FB_TESTS = [("Q1 fb", "fb"), ("Q2 weather", "weather"), ("Q3 fb", "fb"), ("Q4 no id", None),
            ("Q5 weather", "weather"), ("Q6 no id", None), ("Q7 fb", "fb")]


def fb_config(tmp_path):
    tests = []
    for q, cid in FB_TESTS:
        t = {"vars": {"question": q}}
        if cid:
            t["metadata"] = {"conversationId": cid}
        tests.append(t)
    return config(tmp_path, {"prompts": ["file://chat.json"], "providers": [provider()], "tests": tests}, chat=True)


def test_upstream_multiple_turn_conversation_sends_promptfoos_messages(tmp_path, fake_openai, key):
    """promptfoo-features part B §3.6 (mt01): the messages of each of the seven turns, exactly."""
    fake_openai.add_rule(".", ans)
    out = tmp_path / "r.json"
    result = run("-c", fb_config(tmp_path), "-j", 1, "-o", out)
    assert result.exit_code == 0, result.output
    system = ("system", "You are a helpful assistant")

    def u(q):
        return ("user", q)

    def a(q):
        return ("assistant", f"ANS({q})")

    assert sent(fake_openai) == [
        [system, u("Q1 fb")],
        [system, u("Q2 weather")],
        [system, u("Q1 fb"), a("Q1 fb"), u("Q3 fb")],
        [system, u("Q4 no id")],
        [system, u("Q2 weather"), a("Q2 weather"), u("Q5 weather")],
        [system, u("Q4 no id"), a("Q4 no id"), u("Q6 no id")],
        [system, u("Q1 fb"), a("Q1 fb"), u("Q3 fb"), a("Q3 fb"), u("Q7 fb")],
    ]
    got = rows(out)
    # prompt.raw: the compact JSON of what was sent; vars without _conversation; the turn under factcli
    assert got[(6, 0)]["prompt"]["raw"].startswith('[{"role":"system","content":"You are a helpful assistant"},')
    assert got[(6, 0)]["vars"] == {"question": "Q7 fb"}
    assert got[(6, 0)]["metadata"] == {"conversationId": "fb"}
    assert [got[(i, 0)]["factcli"]["conversation"] for i in range(7)] == [
        {"id": "fb", "turn": 1}, {"id": "weather", "turn": 1}, {"id": "fb", "turn": 2}, {"id": None, "turn": 1},
        {"id": "weather", "turn": 2}, {"id": None, "turn": 2}, {"id": "fb", "turn": 3}]


def _comparable(out) -> dict:
    return {k: (r["prompt"]["raw"], r["response"]["output"] if r["response"] else None, r["success"], r.get("error"),
                r["factcli"].get("conversation"), r["vars"]) for k, r in rows(out).items()}


def test_results_do_not_depend_on_concurrency(tmp_path, fake_openai, key):
    """Threads in two providers x two prompts, a storeOutputAs chain and a runSerially test: -j 1 and
    -j 8 (with latency, so calls overlap) give the same rows and send the same requests."""
    fake_openai.add_rule(".", lambda req: f"{req['model']}:{ans(req)}")
    fake_openai.latency = 0.02
    text = "turn={{question}} x={{x}} n={{_conversation | length}}"
    tests = []
    for i in range(12):
        t = {"vars": {"question": f"q{i}"}, "metadata": {"conversationId": f"c{i % 3}"}}
        if i == 4:
            t["options"] = {"storeOutputAs": "x"}
        if i == 7:
            t["options"] = {"runSerially": True}
        tests.append(t)
    cfg = config(tmp_path, {"prompts": ["file://chat.json", text],
                            "providers": [provider("m1"), provider("m2")], "tests": tests}, chat=True)
    outs, requests = [], []
    for j in (1, 8):
        fake_openai.reset()
        out = tmp_path / f"r{j}.json"
        result = run("-c", cfg, "-j", j, "-o", out)
        assert result.exit_code == 0, result.output
        outs.append(_comparable(out))
        requests.append(sorted(json.dumps(m) for m in sent(fake_openai)))
    assert outs[0] == outs[1]
    assert requests[0] == requests[1]
    # turn 3 of thread c1 in the text column of m2 saw its two earlier turns and the stored x
    raw = outs[0][(7, 3)][0]
    assert raw == "turn=q7 x=m2:ANS(turn=q4 x= n=1) n=2"


def test_threads_per_column_text_prompt_history_nests(tmp_path, fake_openai, key):
    """part B §3.8 (mt02): one thread per provider x prompt column; a text prompt's input is the whole
    previous prompt, so history nests."""
    fake_openai.add_rule(r"turn=(\S+)", lambda req: "out-" + re.match(r"turn=(\S+)",
                                                                       req["messages"][-1]["content"]).group(1))
    prompt = "turn={{question}} n={{_conversation | length}} {% for c in _conversation %}<{{c.input}}=>{{c.output}}>{% endfor %}"
    cfg = config(tmp_path, {"prompts": [{"id": prompt, "label": "text"}],
                            "providers": [provider("m1", "provA"), provider("m2", "provB")],
                            "tests": [{"vars": {"question": q}} for q in ("q1", "q2", "q3")]})
    out = tmp_path / "r.json"
    assert run("-c", cfg, "-j", 4, "-o", out).exit_code == 0
    expected = ["turn=q1 n=0 ", "turn=q2 n=1 <turn=q1 n=0 =>out-q1>",
                "turn=q3 n=2 <turn=q1 n=0 =>out-q1><turn=q2 n=1 <turn=q1 n=0 =>out-q1>=>out-q2>"]
    for model in ("m1", "m2"):
        got = [r["json"]["messages"][-1]["content"] for r in fake_openai.requests if r["json"]["model"] == model]
        assert sorted(got) == sorted(expected)
    got = rows(out)
    assert [got[(i, 1)]["prompt"]["raw"] for i in range(3)] == expected


def test_store_output_as_is_kept_per_column_and_overrides_test_vars(tmp_path, fake_openai, key):
    """The register overrides a test var of the same name, feeds var templates, renders empty before
    the first store, and each column sees its own column's value (promptfoo shares one register)."""
    fake_openai.add_rule(r"^A: pick", "first-A")
    fake_openai.add_rule(r"^B: pick", "first-B")
    fake_openai.add_rule(".", ans)
    cfg = config(tmp_path, {
        "prompts": ["A: {{q}} x=[{{x}}]", "B: {{q}} x=[{{x}}]"],
        "providers": [provider()],
        "tests": [{"vars": {"q": "before"}},
                  {"vars": {"q": "pick"}, "options": {"storeOutputAs": "x"}},
                  {"vars": {"q": "use {{x}}", "x": "own-value"}}]})
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-j", 8, "-o", out)
    assert result.exit_code == 0, result.output
    got = rows(out)
    assert got[(0, 0)]["prompt"]["raw"] == "A: before x=[]"
    assert got[(2, 0)]["prompt"]["raw"] == "A: use first-A x=[first-A]"
    assert got[(2, 1)]["prompt"]["raw"] == "B: use first-B x=[first-B]"
    assert got[(2, 0)]["vars"] == {"q": "use {{x}}", "x": "own-value"}  # registers are not the test's vars


def test_upstream_store_and_reuse_outputs(tmp_path, fake_openai, key):
    """promptfoo's store-and-reuse-outputs example (mt14), without its transform."""
    fake_openai.add_rule("favorite fruit", "Mango")
    fake_openai.add_rule("Why do you like", "Because Mango is sweet")
    cfg = config(tmp_path, {
        "prompts": ["Respond to the user: {{message}}"], "providers": [provider()],
        "tests": [{"vars": {"message": "What's your favorite fruit? One word."},
                   "options": {"storeOutputAs": "favoriteFruit"}},
                  {"vars": {"message": "Why do you like {{favoriteFruit}} so much?"},
                   "options": {"storeOutputAs": "reason"}},
                  {"vars": {"message": 'A rebuttal to this argument for loving {{favoriteFruit}}: "{{reason}}"'}}]})
    assert run("-c", cfg, "-j", 4).exit_code == 0
    assert [m[-1][1] for m in sent(fake_openai)] == [
        "Respond to the user: What's your favorite fruit? One word.",
        "Respond to the user: Why do you like Mango so much?",
        'Respond to the user: A rebuttal to this argument for loving Mango: "Because Mango is sweet"']


def test_repeat_makes_each_repetition_its_own_conversation(tmp_path, fake_openai, key):
    fake_openai.add_rule(r"q=(\w+)", lambda req: "out-" + re.search(r"q=(\w+)", req["messages"][-1]["content"]).group(1))
    cfg = config(tmp_path, {"prompts": ["q={{q}} h={% for c in _conversation %}{{c.output}};{% endfor %}"],
                            "providers": [provider()], "tests": [{"vars": {"q": "a"}}, {"vars": {"q": "b"}}]})
    out = tmp_path / "r.json"
    assert run("-c", cfg, "--repeat", 2, "-j", 4, "-o", out).exit_code == 0
    got = rows(out)
    # testIdx: a r0, a r1, b r0, b r1
    assert [got[(i, 0)]["prompt"]["raw"] for i in range(4)] == ["q=a h=", "q=a h=", "q=b h=out-a;", "q=b h=out-a;"]
    assert [got[(i, 0)]["factcli"]["conversation"]["turn"] for i in range(4)] == [1, 1, 2, 2]
    assert [got[(i, 0)]["factcli"]["repeatIdx"] for i in range(4)] == [0, 1, 0, 1]


def _four_turns(tmp_path):
    tests = [{"vars": {"question": f"T{i}"}, "metadata": {"conversationId": "c"}} for i in range(1, 5)]
    return config(tmp_path, {"prompts": ["file://chat.json"], "providers": [provider()], "tests": tests}, chat=True)


def test_resume_in_the_middle_of_a_conversation_repeats_no_call(tmp_path, fake_openai, key, isolated_home):
    fake_openai.add_rule(".", ans)
    cfg = _four_turns(tmp_path)
    assert run("-c", cfg).exit_code == 0
    with sqlite3.connect(isolated_home / "factcli.db") as db:  # as if it had stopped after two turns
        db.execute("DELETE FROM results WHERE test_idx >= 2")
        db.execute("UPDATE runs SET status = 'interrupted', finished_at = NULL")
    fake_openai.reset()
    out = tmp_path / "r.json"
    result = runner.invoke(app, ["eval", "--resume", "latest", "--no-progress-bar", "--no-cache", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 of 4 rows kept" in result.output
    system = ("system", "You are a helpful assistant")
    history = [("user", "T1"), ("assistant", "ANS(T1)"), ("user", "T2"), ("assistant", "ANS(T2)")]
    assert sent(fake_openai) == [[system, *history, ("user", "T3")],
                                 [system, *history, ("user", "T3"), ("assistant", "ANS(T3)"), ("user", "T4")]]
    assert [r["factcli"]["conversation"]["turn"] for r in rows(out).values()] == [1, 2, 3, 4]


def test_a_turn_after_a_failed_turn_is_an_error_and_retry_errors_reruns_the_rest(tmp_path, fake_openai, key):
    fake_openai.add_rule(".", ans)
    fake_openai.enqueue("first answer")
    fake_openai.enqueue_fault(status=400)
    cfg = _four_turns(tmp_path)
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-j", 1, "-o", out)
    assert result.exit_code == 100, result.output
    got = rows(out)
    assert len(fake_openai.requests) == 2  # turns 3 and 4 were not sent
    assert got[(1, 0)]["failureReason"] == 2
    for i in (2, 3):
        assert got[(i, 0)]["failureReason"] == 2
        assert got[(i, 0)]["error"].startswith(f"turn {i + 1} of conversation 'c': an earlier turn failed (turn 2: ")
        assert got[(i, 0)]["prompt"]["raw"] == ""
    fake_openai.reset()
    result = runner.invoke(app, ["eval", "--retry-errors", "latest", "--no-progress-bar", "--no-cache", "-o", str(out)])
    assert result.exit_code == 0, result.output
    system = ("system", "You are a helpful assistant")
    turn1 = [("user", "T1"), ("assistant", "first answer")]
    assert sent(fake_openai) == [
        [system, *turn1, ("user", "T2")],
        [system, *turn1, ("user", "T2"), ("assistant", "ANS(T2)"), ("user", "T3")],
        [system, *turn1, ("user", "T2"), ("assistant", "ANS(T2)"), ("user", "T3"), ("assistant", "ANS(T3)"),
         ("user", "T4")]]
    assert all(r["success"] for r in rows(out).values())


def test_retry_errors_reruns_the_later_turns_of_a_rerun_turn(tmp_path, fake_openai, key):
    """An ERROR from an assertion leaves the answer in the history; retrying that turn reruns the
    turns after it too, whose history may change."""
    fake_openai.add_rule(".", ans)
    tests = [{"vars": {"question": f"T{i}"}, "metadata": {"conversationId": "c"}} for i in range(1, 4)]
    tests[1]["assert"] = [{"type": "starts-with", "value": 5}]  # a handler that refuses its value: ERROR
    cfg = config(tmp_path, {"prompts": ["file://chat.json"], "providers": [provider()], "tests": tests}, chat=True)
    out = tmp_path / "r.json"
    result = run("-c", cfg, "-j", 1, "-o", out)
    got = rows(out)
    assert got[(1, 0)]["failureReason"] == 2, result.output
    assert got[(2, 0)]["success"]  # its history had turn 2's answer
    fake_openai.reset()
    runner.invoke(app, ["eval", "--retry-errors", "latest", "--no-progress-bar", "--no-cache", "-o", out])
    assert [m[-1][1] for m in sent(fake_openai)] == ["T2", "T3"]


def test_model_graded_rubric_prompt_sees_the_conversation(tmp_path, fake_openai, key):
    fake_openai.add_rule(".", '{"pass": true, "score": 1, "reason": "consistent"}', model="grader")
    fake_openai.add_rule(".", ans)
    tests = [{"vars": {"question": "Q1"}},
             {"vars": {"question": "Q2"},
              "assert": [{"type": "llm-rubric", "value": "stays consistent",
                          "rubricPrompt": "History: {{_conversation}}\nLatest: {{output}}\nRubric: {{rubric}}"}]}]
    cfg = config(tmp_path, {"prompts": ["file://chat.json"], "providers": [provider()],
                            "defaultTest": {"options": {"provider": provider("grader")}}, "tests": tests}, chat=True)
    result = run("-c", cfg, "-j", 1)
    assert result.exit_code == 0, result.output
    graded = [r["json"]["messages"] for r in fake_openai.requests if r["json"]["model"] == "grader"]
    assert len(graded) == 1
    text = graded[0][-1]["content"]
    assert text.startswith('History: {"prompt":[{"role":"system"')
    assert '"input":"Q1","output":"ANS(Q1)"' in text and "Latest: ANS(Q2)" in text


def test_scenarios_each_config_entry_is_a_conversation(tmp_path, fake_openai, key):
    fake_openai.add_rule(".", ans)
    cfg = config(tmp_path, {
        "prompts": ["{{who}}: {{q}} n={{_conversation | length}}"], "providers": [provider()],
        "scenarios": [{"config": [{"vars": {"who": "ann"}}, {"vars": {"who": "bob"}}],
                       "tests": [{"vars": {"q": "one"}}, {"vars": {"q": "two"}}]}]})
    out = tmp_path / "r.json"
    assert run("-c", cfg, "-o", out).exit_code == 0
    got = rows(out)
    assert [(r["metadata"]["conversationId"], r["prompt"]["raw"]) for r in got.values()] == [
        ("__scenario_0__", "ann: one n=0"), ("__scenario_0__", "ann: two n=1"),
        ("__scenario_1__", "bob: one n=0"), ("__scenario_1__", "bob: two n=1")]


def test_disable_conversation_var_uses_the_tests_own_value(tmp_path, fake_openai, key):
    fake_openai.add_rule(".", ans)
    cfg = config(tmp_path, {
        "prompts": ["{{q}} h={% for c in _conversation %}{{c.output}};{% endfor %}"], "providers": [provider()],
        "tests": [{"vars": {"q": "a"}},
                  {"vars": {"q": "b", "_conversation": [{"input": "x", "output": "mine"}]},
                   "options": {"disableConversationVar": True}},
                  {"vars": {"q": "c"}}]})
    out = tmp_path / "r.json"
    assert run("-c", cfg, "-o", out).exit_code == 0
    got = rows(out)
    assert [got[(i, 0)]["prompt"]["raw"] for i in range(3)] == [
        "a h=", "b h=mine;", "c h=ANS(a h=);ANS(b h=mine;);"]  # b's turn is still in the thread


def test_store_output_as_must_name_a_var(tmp_path, key):
    cfg = config(tmp_path, {"prompts": ["{{q}}"], "providers": [provider()],
                            "tests": [{"vars": {"q": "a"}, "options": {"storeOutputAs": 3}}]})
    result = run("-c", cfg)
    assert result.exit_code == 1
    assert "tests[0].options.storeOutputAs" in result.output and "Traceback" not in result.output


def test_run_serially_waits_for_what_comes_before_and_holds_what_comes_after():
    from factcli.run.planning.conversations import Conversations
    from factcli.types import EvalStep, Prompt, ProviderSpec, TestCase

    plain, serial = TestCase(), TestCase(options={"runSerially": True})
    tests = [plain, plain, serial, plain, serial, plain]
    steps = [EvalStep(i, 0, 0, t, {}, Prompt(raw="x", label="x"), ProviderSpec(id="echo")) for i, t in enumerate(tests)]
    assert Conversations(steps).waits(steps) == [[], [], [0, 1], [2], [2, 3], [4]]


def test_only_the_rows_a_row_depends_on_are_waited_for():
    from factcli.run.planning.conversations import Conversations
    from factcli.types import EvalStep, Prompt, ProviderSpec, TestCase

    chat, plain = Prompt(raw="{{ _conversation }}", label="c"), Prompt(raw="{{ q }}", label="p")
    a, b = TestCase(metadata={"conversationId": "a"}), TestCase(metadata={"conversationId": "b"})
    store = TestCase(options={"storeOutputAs": "x"})
    steps, specs = [], ProviderSpec(id="echo")
    for i, t in enumerate([a, b, a, store, b]):
        steps.append(EvalStep(i, 0, 0, t, {}, chat, specs))
        steps.append(EvalStep(i, 1, 0, t, {}, plain, specs))
    # column 0: the turns of a and b wait for their own thread; after the storeOutputAs row (test 3), later
    # rows of its column wait for it. Column 1 has no conversation: only test 4 waits (for the register).
    assert Conversations(steps).waits(steps) == [[], [], [], [], [0], [], [], [], [2, 6], [7]]


def test_view_show_and_html_mark_conversation_turns(tmp_path):
    out, html = tmp_path / "r.json", tmp_path / "r.html"
    result = run("-c", ROOT / "examples/conversation/promptfooconfig.yaml", "-o", out, "-o", html)
    assert result.exit_code == 0, result.output
    got = rows(out)
    assert [got[(i, 0)]["response"]["output"] for i in range(7)] == [
        "Nice to meet you, Ada.", "Nice to meet you, Bob.", "Your name is Ada.", "Your name is Bob.",
        "I do not know your name yet.", "Lisbon", "Spring is the best season to visit Lisbon."]
    view = runner.invoke(app, ["view", "latest"], env={"COLUMNS": "120"})
    assert "conv:ada #2" in view.output and "conv:trip #2" in view.output and "conv #1" in view.output
    show = runner.invoke(app, ["show", "latest", "6"])
    assert "Conversation: conv:trip #2 · the model saw 1 earlier turn" in show.output
    assert "turn 1 input:\n    Name one city to visit.\n  turn 1 output:\n    Lisbon" in show.output
    shown = json.loads(runner.invoke(app, ["show", "latest", "2", "--json"]).output)
    assert shown[0]["conversation"]["turn"] == 2
    assert [(e["input"], e["output"]) for e in shown[0]["conversation"]["history"]] == [
        ("My name is Ada.", "Nice to meet you, Ada.")]
    assert "conv:trip #2" in html.read_text()
