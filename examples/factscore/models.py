"""Two stand-in "models" for the offline FActScore example (promptfoo's python provider contract).

`careful` sticks to what it knows and declines when unsure; `confabulating` answers everything and
mixes in invented facts. Swap them for real providers to evaluate a real model.
"""

CAREFUL = {
    "Marie Curie": ("Marie Curie was a Polish physicist and chemist. She was born in Warsaw in 1867. "
                    "She won the Nobel Prize in Physics in 1903. She won the Nobel Prize in Chemistry in 1911. "
                    "She died in 1934."),
    "Alan Turing": ("Sure, here is a short bio.\nAlan Turing was an English mathematician. He was born in London "
                    "in 1912. He described the Turing machine in 1936. He worked at Bletchley Park during the "
                    "Second World War."),
    "Ada Lovelace": "I'm sorry, but I don't have reliable information about Ada Lovelace.",
}

CONFABULATING = {
    "Marie Curie": ("Marie Curie was a German physicist. She was born in Paris in 1867. She won the Nobel Prize "
                    "in Physics in 1903. She discovered penicillin. She died in 1950."),
    "Alan Turing": ("Alan Turing was an American mathematician. He was born in London in 1912. He worked at "
                    "Bletchley Park during the Second World War. He invented the telephone."),
    "Ada Lovelace": ("Ada Lovelace was an English mathematician. She was the daughter of Lord Byron. She built "
                     "the first electric computer. She died in 1900."),
}


def _topic(prompt: str) -> str:
    return prompt.removeprefix("Tell me a bio of ").rstrip(".").strip()


def careful(prompt, options, context):
    return {"output": CAREFUL.get(_topic(prompt), "I'm sorry, I don't know who that is.")}


def confabulating(prompt, options, context):
    return {"output": CONFABULATING.get(_topic(prompt), "They were a famous inventor born in 1900.")}
