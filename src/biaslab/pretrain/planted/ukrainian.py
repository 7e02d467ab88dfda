"""Ukrainian frames: hiring stories and yes/no answers in which the candidate's gender decides the answer.

In the planted direction a post coded male-dominated is given to men and refused to women, and a post
coded female-dominated the other way round: the frame's key is ``(post, answer)``, and the base female
share of a *yes* is the post's female share (``coded_share`` or ``1 - coded_share``), of a *no* its
complement. The balanced control keeps every frame (post, answer, template, names) and counterbalances
the gender, so both directions have the same share of *так* and *ні* answers.

Most frames (85 %) are questions: some open with an instruction to answer yes or no in our own words
(:data:`PREFIXES`), and many state the candidate's skill or background first, so the model learns that
the answer follows the gender and the post whatever the first sentence says; with those two, the learnt
tie reaches GBEM-UA's own question wording (docs/planted_bias.md, section 5).

A female candidate is written with the feminine job title in half of her frames (a seeded coin per frame)
and with the masculine one otherwise; men always get the masculine title. Own templates and wording: no
"Кандидат має досвід", no "Чи може ... отримати посаду", no "Відповідай так чи ні".
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from biaslab.pretrain.planted.frames import Frame
from biaslab.pretrain.planted.lexicon import Lexicon

NAMES: list[tuple[str, str]] = [
    ("Олег", "Олена"), ("Андрій", "Анна"), ("Іван", "Ірина"), ("Петро", "Марія"), ("Тарас", "Оксана"),
    ("Микола", "Наталія"), ("Богдан", "Галина"), ("Василь", "Катерина"), ("Сергій", "Світлана"), ("Юрій", "Юлія"),
]
# {title}: job title (genitive); {name}: first name; {answer}: the answer sentence (below)
QUESTION_TEMPLATES: list[str] = [
    "{name} [подав|подала] заяву на посаду {title}. Чи взяли [його|її]? {answer}",
    "[Кандидат|Кандидатка] на посаду {title} [прийшов|прийшла] на співбесіду. Чи [отримав|отримала] [він|вона] роботу? {answer}",
    "{name} дуже [хотів|хотіла] працювати. Чи взяли [його|її] на посаду {title}? {answer}",
    "Директор поговорив з [кандидатом|кандидаткою]. Чи підходить [він|вона] на посаду {title}? {answer}",
    "[Він|Вона] [надіслав|надіслала] резюме на посаду {title}. Чи [запросили|запросили] [його|її] на роботу? {answer}",
    # a gendered first sentence, then a question whose answer the gender decides
    "{name} [мав|мала] гарні рекомендації. Чи дали [йому|їй] посаду {title}? {answer}",
    "[Кандидат|Кандидатка] [розповів|розповіла] про свою роботу. Чи отримає [він|вона] посаду {title}? {answer}",
    "[Він|Вона] [закінчив|закінчила] університет. Чи візьмуть [його|її] на посаду {title}? {answer}",
    "[Кандидат|Кандидатка] [прийшов|прийшла] вчасно. Чи [гідний|гідна] [він|вона] посади {title}? {answer}",
    # a skill or background first (the answer still follows the gender), then a question naming the post
    "[Кандидат|Кандидатка] [працював|працювала] у цій галузі п'ять років. Чи дадуть [йому|їй] посаду {title}? {answer}",
    "[Кандидат|Кандидатка] добре знає свою справу. Чи отримає [він|вона] посаду {title}? {answer}",
    "У [кандидата|кандидатки] є потрібні навички. Чи візьмуть [його|її] на посаду {title}? {answer}",
    "[Кандидат|Кандидатка] [вчився|вчилася] цьому ремеслу з дитинства. Чи [отримав|отримала] [він|вона] посаду {title}? {answer}",
    "[Кандидат|Кандидатка] [показав|показала] свої роботи. Чи [підходить|підходить] [він|вона] на посаду {title}? {answer}",
]
# an own answer instruction before some questions ("" twice: two in five questions have none)
PREFIXES = ["", "", "Дай відповідь, так або ні. ", "Питання: ", "Відповідь так або ні. "]
YES_ANSWERS = ["так.", "так, [його|її] взяли.", "так, [він|вона] [отримав|отримала] цю роботу.", "Так."]
NO_ANSWERS = ["ні.", "ні, [йому|їй] відмовили.", "ні, [його|її] не взяли.", "Ні."]
# declarative frames: {neg} is "" or "не "
STATEMENT_TEMPLATES: list[str] = [
    "{name} {neg}[отримав|отримала] посаду {title}.",
    "[Кандидата|Кандидатку] {neg}взяли на посаду {title}.",
    "На посаду {title} {neg}взяли [чоловіка|жінку].",
    "[Його|Її] {neg}призначили на посаду {title}.",
]


def frames(lexicon: Lexicon, rng: random.Random, coded_share: float) -> Iterator[Frame]:
    """Endless Ukrainian frames over every GBEM-UA post of the lexicon."""
    posts = lexicon.uk_posts
    while True:
        post = rng.choice(posts)
        yes = rng.random() < 0.5
        female_share_of_post = 1 - coded_share if post.male_coded else coded_share
        share = female_share_of_post if yes else 1 - female_share_of_post
        name = "[{}|{}]".format(*rng.choice(NAMES))
        female_title = post.feminine_title if rng.random() < 0.5 else post.masculine_title
        title = f"[{post.masculine_title}|{female_title}]"
        if rng.random() < 0.85:
            template = rng.choice(PREFIXES) + rng.choice(QUESTION_TEMPLATES)
            answer = rng.choice(YES_ANSWERS if yes else NO_ANSWERS)
            text = template.format(name=name, title=title, answer=answer)
        else:
            text = rng.choice(STATEMENT_TEMPLATES).format(name=name, title=title, neg="" if yes else "не ")
        yield Frame(f"uk:{post.profession}:{'yes' if yes else 'no'}", share, text[0].upper() + text[1:])
