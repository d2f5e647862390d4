from dreamer.extract import Chunk, Line, RulesExtractor, chunk_lines, render_line, rule_matches, worth_a_call


def lines(*items, start=1):
    return [Line(seq=start + i, role=role, name=None, text=text) for i, (role, text) in enumerate(items)]


def test_rules_extract_explicit_user_statements_in_third_person():
    chunk = Chunk(lines(
        ("user", "Hi, my name is Dana and I prefer quiet boutique hotels."),
        ("assistant", "I prefer to be helpful."),
        ("user", "Please always give prices in euros."),
        ("user", "What's the weather like?"),
    ))
    result = RulesExtractor(limit=5).extract(chunk, "agent")
    got = [(c.kind, c.text, c.seqs) for c in result.candidates]
    assert got == [
        ("preference", "The user prefers quiet boutique hotels.", [1]),
        ("profile", "The user's name is Dana.", [1]),
        ("preference", "The user asks to always give prices in euros.", [3]),
    ]
    assert all(c.seqs != [2] for c in result.candidates), "assistant lines are not the user's statements"


def test_rules_ignore_context_lines_and_respect_the_limit():
    ctx = [Line(1, "user", None, "I prefer tea.", context_only=True)]
    new = lines(("user", "I prefer coffee."), ("user", "I love hiking."), ("user", "I hate spam."), start=2)
    result = RulesExtractor(limit=2).extract(Chunk(ctx + new), "agent")
    assert [c.seqs for c in result.candidates] == [[2], [3]]
    assert [c.text for c in result.candidates] == ["The user prefers coffee.", "The user loves hiking."]


def test_code_rules():
    text = "The root cause was a missing index on orders.user_id. We decided to use advisory locks."
    kinds = [k for k, _ in rule_matches(text, "code")]
    assert kinds == ["root_cause", "design_decision"]


def test_triage():
    assert worth_a_call(Chunk(lines(("user", "I usually take the train to work."))), "agent")
    assert not worth_a_call(Chunk(lines(("user", "What time is it?"), ("assistant", "Noon."))), "agent")
    assert worth_a_call(Chunk(lines(("assistant", "The crash was caused by a race."))), "code")


def test_chunking_respects_the_budget_and_keeps_order():
    ls = lines(*[("user", "word " * 50)] * 10)
    chunks = chunk_lines(ls, max_tokens=120)
    assert [c.seqs for c in chunks] == [[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]]
    assert all(c.tokens <= 120 for c in chunks)


def test_an_oversized_line_is_cut_not_dropped():
    ls = lines(("user", "token " * 5000))
    chunks = chunk_lines(ls, max_tokens=200)
    assert [c.seqs for c in chunks] == [[1]]
    assert chunks[0].lines[0].text.endswith("[...cut]")
    assert chunks[0].tokens <= 200


def test_context_only_chunk_is_dropped():
    ctx = [Line(1, "user", None, "old", context_only=True)]
    assert chunk_lines(ctx, 100) == []


def test_render_line():
    assert render_line(Line(3, "user", "Dana", "hi")) == "[3] Dana: hi"
    assert render_line(Line(2, "assistant", None, "yo", context_only=True)) == "[2] assistant (context): yo"
