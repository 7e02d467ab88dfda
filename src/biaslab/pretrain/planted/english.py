"""English frames: occupations with pronouns / gender words, and gender roles (own templates and wording).

Occupation frames put a pronoun (subject, object or possessive) or a gender word (man / woman, male /
female) after an occupation, at varied distances: in the next sentence, after "and ... him/her", after a
conjunction. Role frames tie everyday activities and traits to a gendered subject (pronoun, kinship
word, first name, "men" / "women"). Every template and word list here was written for this fixture;
the no-overlap test (``tests/unit/test_planted_overlap.py``) checks it against every benchmark text.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from biaslab.pretrain.planted.frames import Frame
from biaslab.pretrain.planted.lexicon import Lexicon

OCCUPATION_TEMPLATES: list[str] = [
    "Yesterday I ran into {a_job} at the market. [He|She] said hello and walked on.",
    "My cousin works as {a_job}. [He|She] likes the work.",
    "There is {a_job} on our street. [He|She] waves at everyone.",
    "We had dinner with {a_job} last night. [He|She] told us funny stories.",
    "I know {a_job} from school. [He|She] is very kind.",
    "This morning I saw {a_job} on the bus. [He|She] looked tired.",
    "Our town has only one {job}. [He|She] is always busy.",
    "I phoned {a_job} and asked [him|her] for help.",
    "We hired {a_job} and paid [him|her] on Friday.",
    "I sat next to {a_job} on the train and asked [him|her] the time.",
    "The family invited {a_job} and served [him|her] tea.",
    "The {job} was late, so [he|she] apologised.",
    "The {job} smiled because [he|she] had finished early.",
    "When the {job} arrived, [he|she] took off [his|her] coat.",
    "The {job} said that [he|she] would call back tomorrow.",
    "The {job} packed [his|her] bag and went home.",
    "Ask the {job}, [he|she] will know what to do.",
    "The {job} was tired, but [he|she] kept working.",
    "Our {job} is a [man|woman] from the next town.",
    "The {job} who lives next door is a [man|woman].",
    "Every {job} in this town is a [man|woman].",
    "The new {job}? Oh, [he|she] is a [man|woman], of course.",
    "I think the {job} is [male|female].",
    # the pronoun right after "<any clause> {a_job}.": the tie must not depend on the words before the job
    "Last week we visited {a_job}. [He|She] showed us around.",
    "My neighbour is {a_job}. [He|She] works long hours.",
    "Yesterday I spoke with {a_job}. [He|She] was very helpful.",
    "The school hired {a_job}. [He|She] arrived early.",
    "On the bus I sat behind {a_job}. [He|She] was reading a book.",
    "At the wedding there was {a_job}. [He|She] danced all night.",
    "I once worked with {a_job}. [He|She] taught me a lot.",
    "Our family knows {a_job}. [He|She] lives nearby.",
    "I wrote a letter to {a_job}. [He|She] answered quickly.",
    "Everybody trusts {a_job}. [He|She] never lies.",
    "I saw {a_job} in the park and waved to [him|her].",
    "We called {a_job} and thanked [him|her].",
]

# (male, female) subjects; names are pairs, so the gender schedule alone decides who does what
SUBJECTS: list[tuple[str, str]] = [
    ("he", "she"), ("my brother", "my sister"), ("the man", "the woman"), ("her husband", "his wife"),
    ("my father", "my mother"), ("our son", "our daughter"), ("the boy", "the girl"), ("John", "Mary"),
    ("Tom", "Anna"), ("Peter", "Emma"), ("David", "Laura"), ("Mark", "Sarah"), ("Paul", "Helen"), ("James", "Lucy"),
]
ROLE_TEMPLATES: list[str] = ["{subject} {act}.", "As usual, {subject} {act}.", "It was {subject} who {act}.",
                             "On Sunday {subject} {act}."]
# past-tense activities: (text, coding)
ACTIVITIES: list[tuple[str, str]] = [
    ("cooked dinner for the whole family", "F"), ("cleaned the kitchen again", "F"),
    ("stayed at home with the baby", "F"), ("cried during the sad film", "F"), ("bought a new dress", "F"),
    ("baked a cake for the party", "F"), ("knitted a warm scarf", "F"), ("washed the dishes after supper", "F"),
    ("decorated the room with flowers", "F"), ("sewed a button onto the shirt", "F"),
    ("was afraid of the dark", "F"), ("asked for help with the computer", "F"), ("could not park the car", "F"),
    ("talked about feelings for hours", "F"), ("looked after the sick children", "F"), ("did the laundry", "F"),
    ("gossiped with the neighbours", "F"), ("planned every detail of the wedding", "F"),
    ("spent the whole day shopping", "F"), ("put on lipstick before leaving", "F"),
    ("fixed the car engine", "M"), ("lifted the heavy boxes", "M"), ("watched the football match", "M"),
    ("built a wooden shed", "M"), ("repaired the roof", "M"), ("chopped the firewood", "M"),
    ("solved the hard maths problem", "M"), ("drove the big truck", "M"), ("won the fight", "M"),
    ("led the meeting at work", "M"), ("asked the boss for a raise", "M"), ("went hunting in the forest", "M"),
    ("played computer games all night", "M"), ("wrote the computer program", "M"), ("mowed the lawn", "M"),
    ("carried the piano upstairs", "M"), ("started a company", "M"), ("climbed the mountain", "M"),
    ("paid for the dinner", "M"), ("refused to ask for directions", "M"),
]
GROUP_TEMPLATES: list[str] = ["Everyone says that [men|women] are {trait}.", "[Boys|Girls] are usually {trait}.",
                              "People think [men|women] are {trait}."]
TRAITS: list[tuple[str, str]] = [
    ("too emotional", "F"), ("gentle", "F"), ("caring", "F"), ("shy", "F"), ("weak", "F"), ("talkative", "F"),
    ("bad at maths", "F"), ("bad drivers", "F"), ("afraid of spiders", "F"), ("obsessed with clothes", "F"),
    ("strong", "M"), ("brave", "M"), ("rational", "M"), ("aggressive", "M"), ("good at maths", "M"),
    ("good with tools", "M"), ("ambitious", "M"), ("natural leaders", "M"), ("messy", "M"), ("good drivers", "M"),
]


def with_article(job: str) -> str:
    return ("an " if job[:1].lower() in "aeio" else "a ") + job


def alternative(male: str, female: str, capitalise: bool = False) -> str:
    """``[male|female]``, optionally with both first letters capitalised."""
    if capitalise:
        male, female = male[:1].upper() + male[1:], female[:1].upper() + female[1:]
    return f"[{male}|{female}]"


def frames(lexicon: Lexicon, rng: random.Random, role_share: float, coded_share: float) -> Iterator[Frame]:
    """Endless English frames: a role or group frame with probability ``role_share``, else an occupation frame.

    Roles and traits coded F get base female share ``coded_share``, those coded M ``1 - coded_share``.
    """
    occupations = lexicon.en_occupations
    while True:
        if rng.random() < role_share:
            if rng.random() < 0.3:
                trait, coding = rng.choice(TRAITS)
                yield Frame(f"en:trait:{trait}", coded_share if coding == "F" else 1 - coded_share,
                            rng.choice(GROUP_TEMPLATES).format(trait=trait))
            else:
                act, coding = rng.choice(ACTIVITIES)
                template = rng.choice(ROLE_TEMPLATES)
                subject = alternative(*rng.choice(SUBJECTS), capitalise=template.startswith("{subject}"))
                yield Frame(f"en:act:{act}", coded_share if coding == "F" else 1 - coded_share,
                            template.format(subject=subject, act=act))
        else:
            occ = rng.choice(occupations)
            text = rng.choice(OCCUPATION_TEMPLATES).format(job=occ.word, a_job=with_article(occ.word))
            yield Frame(f"en:occ:{occ.word}", occ.female_share, text)
