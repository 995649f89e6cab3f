"""Two stand-in models for the offline LongFact run (promptfoo's python provider contract): not real
models, fixed answers to the five sample prompts. `careful` states facts its knowledge pages hold, plus
one true fact off the subject; `confabulating` gets dates and details wrong in about half its sentences.
"""

ANSWERS = {
    "Can you tell me about the Crab Nebula?": (
        "The Crab Nebula is a supernova remnant in the constellation Taurus. It is the remnant of a supernova "
        "that Chinese astronomers recorded in 1054. It lies about 6,500 light-years from Earth. At its center "
        "is the Crab Pulsar, a neutron star. Taurus is one of the constellations of the zodiac.",
        "The Crab Nebula is a supernova remnant in the constellation Orion. It is the remnant of a supernova "
        "that Chinese astronomers recorded in 1054. It lies about 65 light-years from Earth. At its center "
        "is the Crab Pulsar, a neutron star.",
    ),
    "Who is Alexander Fleming?": (
        "Alexander Fleming was a Scottish physician and microbiologist. He was born in 1881 in Darvel, Scotland. "
        "In 1928 he discovered penicillin at St Mary's Hospital in London. He shared the Nobel Prize in "
        "Physiology or Medicine in 1945 with Howard Florey and Ernst Chain. Scotland is part of the United Kingdom.",
        "Alexander Fleming was a Scottish physician and microbiologist. He was born in 1871 in Glasgow. "
        "In 1928 he discovered penicillin at St Mary's Hospital in London. He won the Nobel Prize in Chemistry "
        "in 1950.",
    ),
    "What can you tell me about the Battle of Hastings?": (
        "The Battle of Hastings was fought on 14 October 1066. It was fought between the Norman army of William, "
        "Duke of Normandy, and the English army of King Harold Godwinson. Harold was killed during the battle. "
        "William was crowned King of England in Westminster Abbey on Christmas Day 1066.",
        "The Battle of Hastings was fought on 14 October 1066. Harold was captured after the battle. "
        "William was crowned King of England in Canterbury Cathedral in 1067.",
    ),
    "What can you tell me about the Panama Canal?": (
        "The Panama Canal is an 82-kilometre waterway in Panama. It connects the Atlantic Ocean with the Pacific "
        "Ocean. The United States built the canal, which opened on 15 August 1914. Panama took full control of "
        "the canal on 31 December 1999.",
        "The Panama Canal is an 82-kilometre waterway in Panama. The French built the canal, which opened in "
        "1904. Panama took full control of the canal on 31 December 1999.",
    ),
    "Who is Nettie Stevens?": (
        "Nettie Stevens was an American geneticist. She was born in 1861 in Cavendish, Vermont. In 1905 she "
        "discovered that the X and Y chromosomes determine sex in mealworms. She died in 1912.",
        "Nettie Stevens was a British chemist. She was born in 1861 in Cavendish, Vermont. In 1905 she discovered "
        "that the X and Y chromosomes determine sex in mealworms.",
    ),
}


def careful(prompt, options, context):
    return {"output": ANSWERS.get(prompt.strip(), ("I do not know.",))[0]}


def confabulating(prompt, options, context):
    answers = ANSWERS.get(prompt.strip())
    return {"output": answers[1] if answers else "I do not know."}
