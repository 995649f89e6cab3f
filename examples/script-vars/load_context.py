"""A script var: promptfoo calls get_var(var_name, prompt, other_vars) for each row; other_vars are the
row's other vars (the question here). Return {"output": text}, or {"error": message} to make the row
an ERROR."""

POLICIES = {
    "parental leave": "Employees get 90 days of paid parental leave.",
    "home": "Remote work is allowed up to two days a week.",
    "vacation": "Every employee gets 25 vacation days a year.",
}


def get_var(var_name, prompt, other_vars):
    question = other_vars["question"].lower()
    found = [text for topic, text in POLICIES.items() if topic in question]
    if not found:
        return {"error": f"no policy matches {other_vars['question']!r}"}
    return {"output": "\n".join(found)}
