"""Two stand-in models for the offline FACTS Grounding example (promptfoo's python provider contract).

`careful` answers from the document only; `embellishing` adds details the document does not
contain, and once dodges the request with a vague sentence (an ineligible response).
"""

ANSWERS = {
    "visits": (
        "Visits rose to 312,000 in 2024, up from 287,000 in 2023. Loans of physical items fell slightly "
        "to 402,000. E-book and audiobook loans rose by 31 percent to 118,000.",
        "Visits rose to 312,000 in 2024, up from 287,000 in 2023. The new cafe in the central building "
        "attracted many first-time visitors. E-book and audiobook loans rose by 31 percent to 118,000.",
    ),
    "budget": (
        "The operating budget was 4.2 million euros. Seventy-one percent went to staff, 14 percent to the "
        "collection, 9 percent to the buildings and 6 percent to technology. The 3 percent increase for "
        "2025 will mainly extend opening hours at Millrace on Sunday afternoons.",
        "The library managed its money carefully during the year.",
    ),
    "problems": (
        "Demand for study space exceeded supply during exam periods, when the 140 seats were often all "
        "taken by mid-morning. The library plans to convert a storage room into a quiet study room with "
        "24 seats by the end of 2025. Recruiting volunteers for homework help remained difficult, with "
        "only 18 of the 30 planned places filled.",
        "Demand for study space exceeded supply during exam periods. The library plans to convert a "
        "storage room into a quiet study room with 24 seats by the end of 2025. Volunteers were easy to "
        "recruit thanks to a national campaign.",
    ),
}


def _topic(prompt: str) -> str:
    request = prompt.rsplit("Request:", 1)[-1].lower()
    if "budget" in request:
        return "budget"
    if "problem" in request or "challenge" in request:
        return "problems"
    return "visits"


def _reply(answer: str, prompt: str) -> dict:
    return {"output": answer, "tokenUsage": {"prompt": len(prompt.split()), "completion": len(answer.split())}}


def careful(prompt, options, context):
    return _reply(ANSWERS[_topic(prompt)][0], prompt)


def embellishing(prompt, options, context):
    return _reply(ANSWERS[_topic(prompt)][1], prompt)
