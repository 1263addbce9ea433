"""Regenerates the corpora reasoning.txt and repetitive.txt from the hand-written pieces below.

A build-time tool, kept out of the wheel. Run from anywhere: ``python tools/generate_corpora.py``
rewrites the shipped files in ``pytest_specperf/data/``; ``--out DIR`` writes them elsewhere.
Deterministic (fixed seeds), so the shipped files change only when this script does.
All text here was written for this project; prose.txt and code.txt are hand-written directly.
Units in every corpus are separated by a line holding only ``%%``.
"""

from __future__ import annotations

import argparse
import math
import random
import re
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

#: where the package ships its corpora
DATA = Path(__file__).resolve().parent.parent / "pytest_specperf" / "data"
SEPARATOR = "\n%%\n"

# -- reasoning ----------------------------------------------------------------------------------

OPENERS = [
    "Okay, so here is the problem. {q}",
    "Alright, let me work through this. {q}",
    "Let me think about this carefully. {q}",
    "So the question is this: {q}",
    "Hmm. {q}",
    "First, let me restate the problem to be sure I have it. {q}",
    "We need to be careful here. {q}",
    "The user is asking something concrete. {q}",
    "Right. {q}",
    "Now for the next one. {q}",
    "Here is what we are given. {q}",
    "This looks simple, but let me not rush it. {q}",
    "Interesting problem. {q}",
    "Good, a concrete question. {q}",
    "Well, here goes. {q}",
    "OK. {q}",
    "Looking at this again: {q}",
    "Reading the problem statement: {q}",
    "To answer this I need a plan. {q}",
    "Let's see. {q}",
]

PLANS = [
    "Let me break it into steps.",
    "I'll go step by step and check each step.",
    "Plan: set up the quantities, compute, then verify.",
    "The cleanest way is to write down what we know first.",
    "I'll do the arithmetic slowly, since that is where mistakes creep in.",
    "Let me define the unknowns first.",
    "There are a couple of ways to do this; I'll take the direct one.",
    "I think the approach is clear, but I'll verify at the end.",
]

CHECKS = [
    "Let's check: {c}",
    "Let me verify that: {c}",
    "Double-checking: {c}",
    "Sanity check: {c}",
    "Quick check: {c}",
    "Let me confirm by another route: {c}",
    "Verify: {c}",
    "Does that make sense? {c}",
]

CONCLUDE = [
    "Therefore, {a}",
    "So the answer is: {a}",
    "Hence {a}",
    "That settles it: {a}",
    "So, putting it together, {a}",
    "Final answer: {a}",
    "Therefore the result is that {a}",
    "Thus {a}",
]

WAITS = [
    "Wait, that's wrong because {why}",
    "Hmm, wait. That can't be right: {why}",
    "Actually, no. {why}",
    "Hold on, I made an error: {why}",
    "Wait, let me redo that. {why}",
    "Hmm, that doesn't look right. {why}",
]

NAMES = [
    "Amara", "Bruno", "Chen", "Dalia", "Emeka", "Freya", "Goran", "Hana", "Ivo", "Jun", "Kofi", "Lena",
    "Mateo", "Nadia", "Oskar", "Priya", "Quinn", "Rosa", "Sami", "Tove", "Umar", "Vera", "Wen", "Yusuf",
]
ITEMS = [
    ("notebook", "notebooks"), ("pencil", "pencils"), ("mug", "mugs"), ("lamp", "lamps"),
    ("ticket", "tickets"), ("loaf of bread", "loaves of bread"), ("bag of rice", "bags of rice"),
    ("cable", "cables"), ("plant pot", "plant pots"), ("towel", "towels"), ("battery", "batteries"),
]


def pick(rng: random.Random, seq: list[str]) -> str:
    return seq[rng.randrange(len(seq))]


INTERJECTIONS = [
    "Hmm, let me make sure I am answering what was actually asked.",
    "Okay, that part is done.",
    "Let me slow down here; this is the step where it is easy to slip.",
    "Good. Moving on.",
    "I think that's right, but I'll confirm it below.",
    "So far so good.",
    "Let me re-read the question once more before going on.",
    "Actually, writing the intermediate numbers down explicitly will help.",
    "Right, nothing surprising yet.",
    "One thing to keep in mind: units. Everything here is consistent.",
]


def opener(rng: random.Random, question: str) -> str:
    return pick(rng, OPENERS).format(q=question[0].upper() + question[1:])


CONNECTIVES = ["so ", "then ", "this means ", "therefore ", "next, ", "now ", "so then ", "that gives: "]


def wait(rng: random.Random, why: str) -> str:
    """A self-correction; ``why`` starts a new sentence after a full stop."""
    template = pick(rng, WAITS)
    if ". {why}" in template:
        why = why[0].upper() + why[1:]
    return template.format(why=why)


def step_label(rng: random.Random, style: int, i: int, n: int) -> str:
    if style == 0:
        return f"Step {i}: "
    if style == 1:
        return f"{i}. "
    if i == 1:
        return "First, "
    if i == n:
        return "Finally, "
    return pick(rng, ["Next, ", "Then ", "Now ", "After that, ", "Also, ", "And then ", "Second, " if i == 2 else
                      "Then, "])


def steps(rng: random.Random, lines: list[str]) -> str:
    style = rng.randrange(3)
    out = []
    for i, line in enumerate(lines, 1):
        label = step_label(rng, style, i, len(lines))
        # Step lines are written lower-case; numbered lists read better capitalised. A thinking
        # trace links its steps, so some get a connective.
        if style < 2:
            if i > 1 and rng.random() < 0.45:
                line = pick(rng, CONNECTIVES) + line
            line = line[0].upper() + line[1:]
        out.append(label + line)
    return ("\n" if style < 2 else " ").join(out)


def tidy(text: str) -> str:
    """Signs written the way a person would: 3 + -2 -> 3 - 2, 4 − -12 -> 4 + 12, 1y -> y."""
    for a, b in (("+ -", "− "), ("− -", "+ "), ("- -", "+ "), ("·-", "·(−"), ("= +", "= ")):
        text = text.replace(a, b)
    text = re.sub(r"·\(−(\d+)", r"·(−\1)", text)
    text = re.sub(r"(?<![\w.])1([xy])\b", r"\1", text)
    return text


def think(rng: random.Random, parts: list[str]) -> str:
    """Paragraphs of one problem, with the asides a thinking trace has between steps."""
    out = [parts[0]]
    used: set[str] = set()
    for part in parts[1:]:
        if rng.random() < 0.3:
            aside = pick(rng, INTERJECTIONS)
            if aside not in used:
                used.add(aside)
                out.append(aside)
        out.append(part)
    return tidy("\n\n".join(out))


def wrong_product(rng: random.Random, a: int, b: int) -> int:
    """A plausible slip: a dropped carry or a misread digit."""
    p = a * b
    return p + rng.choice([-10, 10, -100, 100, -1, 1, 9, -9])


def shopping(rng: random.Random) -> str:
    who = pick(rng, NAMES)
    n1, p1 = rng.randint(3, 14), ITEMS[rng.randrange(len(ITEMS))][1]
    n2, p2 = rng.randint(2, 9), ITEMS[rng.randrange(len(ITEMS))][1]
    while p2 == p1:
        p2 = ITEMS[rng.randrange(len(ITEMS))][1]
    c1, c2 = rng.randint(120, 1890), rng.randint(150, 2400)  # cents
    disc = rng.choice([5, 10, 15, 20, 25])
    q = (f"{who} buys {n1} {p1} at ${c1 / 100:.2f} each and {n2} {p2} at ${c2 / 100:.2f} each, and the shop "
         f"takes {disc}% off the whole bill. What does {who} pay?")
    t1, t2 = n1 * c1, n2 * c2
    total = t1 + t2
    off = total * disc / 100
    pay = total - off
    lines = []
    if rng.random() < 0.4:
        bad = wrong_product(rng, n1, c1)
        lines.append(f"the {p1} cost {n1} × {c1 / 100:.2f} = {bad / 100:.2f}.")
        why = (f"{n1} × {c1} is {n1} × {c1 // 100 * 100} + {n1} × {c1 % 100} = {n1 * (c1 // 100 * 100)} + "
               f"{n1 * (c1 % 100)} = {t1} cents, not {bad}.")
        lines.append(wait(rng, why) + f" So the {p1} cost {t1 / 100:.2f}.")
    else:
        lines.append(f"the {p1} cost {n1} × {c1 / 100:.2f} = {t1 / 100:.2f}.")
    lines.append(f"the {p2} cost {n2} × {c2 / 100:.2f} = {t2 / 100:.2f}.")
    lines.append(f"before the discount the bill is {t1 / 100:.2f} + {t2 / 100:.2f} = {total / 100:.2f}.")
    lines.append(f"{disc}% of {total / 100:.2f} is {total / 100:.2f} × {disc / 100:g} = {off / 100:.2f}.")
    lines.append(f"subtract it: {total / 100:.2f} − {off / 100:.2f} = {pay / 100:.2f}.")
    check = (f"paying {100 - disc}% directly gives {total / 100:.2f} × {(100 - disc) / 100:g} = "
             f"{pay / 100:.2f}, the same.")
    ans = f"{who} pays ${pay / 100:.2f}" + (" (rounded to the cent)." if pay != int(pay) else ".")
    return think(rng, [
        opener(rng, q), pick(rng, PLANS), steps(rng, lines),
        pick(rng, CHECKS).format(c=check), pick(rng, CONCLUDE).format(a=ans),
    ])


def trains(rng: random.Random) -> str:
    d = rng.randrange(120, 900, 10)
    v1, v2 = rng.randrange(40, 130, 5), rng.randrange(45, 140, 5)
    a, b = rng.sample(["Arlen", "Bexley", "Corran", "Dunmore", "Elsby", "Fenwick", "Galloway", "Hatherly"], 2)
    q = (f"two trains start at the same time from {a} and {b}, which are {d} km apart, and travel towards "
         f"each other at {v1} km/h and {v2} km/h. When and where do they meet?")
    closing = v1 + v2
    t = d / closing
    x = v1 * t
    hours = int(t)
    minutes = (t - hours) * 60
    lines = [
        f"the distance between them shrinks at the sum of the speeds, {v1} + {v2} = {closing} km/h.",
        f"time to meet = distance / closing speed = {d} / {closing} = {t:.4f} hours.",
        f"{t:.4f} hours is {hours} h and {minutes:.1f} min (0.{str(round(t - hours, 4))[2:] or '0'} × 60).",
        f"the first train covers {v1} × {t:.4f} = {x:.2f} km from {a}.",
    ]
    aside = ""
    if rng.random() < 0.35:
        wrong = d / abs(v1 - v2) if v1 != v2 else d / v1
        aside = wait(rng,
            why=f"I almost divided by the difference of the speeds and got {wrong:.2f} h, but that is for one train "
                f"catching up with another going the same way. Here they approach each other, so the speeds add.")
    check = (f"the second train covers {v2} × {t:.4f} = {d - x:.2f} km, and {x:.2f} + {d - x:.2f} = {d} km, "
             f"the full distance.")
    ans = f"they meet after about {hours} h {round(minutes)} min, {x:.1f} km from {a} ({d - x:.1f} km from {b})."
    parts = [opener(rng, q), pick(rng, PLANS)]
    if aside:
        parts.append(aside)
    parts += [steps(rng, lines), pick(rng, CHECKS).format(c=check), pick(rng, CONCLUDE).format(a=ans)]
    return think(rng, parts)


def linear(rng: random.Random) -> str:
    x = rng.randint(-12, 15)
    a, c = rng.randint(2, 11), rng.randint(1, 9)
    while c == a:
        c = rng.randint(1, 9)
    b = rng.randint(-30, 30)
    d = a * x + b - c * x
    q = f"solve {a}x + {b} = {c}x + {d} for x.".replace("+ -", "- ")
    lines = [
        f"subtract {c}x from both sides: {a - c}x + {b} = {d}.".replace("+ -", "- "),
        f"subtract {b} from both sides: {a - c}x = {d} − ({b}) = {d - b}.",
        f"divide by {a - c}: x = {d - b} / {a - c} = {x}.",
    ]
    parts = [opener(rng, q), steps(rng, lines)]
    if rng.random() < 0.4:
        parts.insert(1, wait(rng,
            why=f"my first instinct was to add {c}x to both sides, which would give {a + c}x on the left and "
                f"leave x on both sides. Collecting terms means subtracting."))
    lhs, rhs = a * x + b, c * x + d
    parts.append(pick(rng, CHECKS).format(
        c=f"left side {a}·({x}) + {b} = {lhs}; right side {c}·({x}) + {d} = {rhs}. They match.".replace(
            "+ -", "- ")))
    parts.append(pick(rng, CONCLUDE).format(a=f"x = {x}."))
    return think(rng, parts)


def system2(rng: random.Random) -> str:
    x, y = rng.randint(-6, 12), rng.randint(-6, 12)
    a1, b1, a2, b2 = rng.randint(1, 7), rng.randint(1, 7), rng.randint(1, 7), rng.randint(-5, 7)
    while a1 * b2 - a2 * b1 == 0 or b2 == 0:
        a2, b2 = rng.randint(1, 7), rng.randint(-5, 7)
    c1, c2 = a1 * x + b1 * y, a2 * x + b2 * y
    q = f"find x and y with {a1}x + {b1}y = {c1} and {a2}x + {b2}y = {c2}.".replace("+ -", "- ")
    det = a1 * b2 - a2 * b1
    lines = [
        f"multiply the first equation by {a2} and the second by {a1}, so the x terms match: "
        f"{a1 * a2}x + {b1 * a2}y = {c1 * a2} and {a1 * a2}x + {b2 * a1}y = {c2 * a1}.",
        f"subtract the second from the first: ({b1 * a2} − {b2 * a1})y = {c1 * a2} − {c2 * a1}, "
        f"so {b1 * a2 - b2 * a1}y = {c1 * a2 - c2 * a1}.",
        f"y = {c1 * a2 - c2 * a1} / {b1 * a2 - b2 * a1} = {y}.",
        f"put y = {y} into the first equation: {a1}x + {b1 * y} = {c1}, so {a1}x = {c1 - b1 * y} and x = {x}.",
    ]
    check = (f"the second equation gives {a2}·{x} + {b2}·{y} = {a2 * x} + {b2 * y} = {c2}. Correct. "
             f"The determinant {a1}·{b2} − {a2}·{b1} = {det} is not zero, so this is the only solution.")
    return think(rng, [
        opener(rng, q), "Elimination looks easiest here.",
        steps(rng, lines), pick(rng, CHECKS).format(c=check), pick(rng, CONCLUDE).format(a=f"x = {x}, y = {y}."),
    ])


def compound(rng: random.Random) -> str:
    p = rng.randrange(500, 20000, 250)
    r = rng.choice([2, 3, 4, 5, 6, 7, 8])
    n = rng.randint(2, 5)
    q = f"an account holds ${p} and earns {r}% a year, compounded yearly. How much is there after {n} years?"
    bal = float(p)
    lines = []
    for year in range(1, n + 1):
        interest = bal * r / 100
        lines.append(f"year {year}: interest {r}% of {bal:.2f} = {interest:.2f}, so the balance becomes "
                     f"{bal:.2f} + {interest:.2f} = {bal + interest:.2f}.")
        bal += interest
    formula = p * (1 + r / 100) ** n
    parts = [opener(rng, q),
             "I'll track the balance year by year instead of jumping straight to the formula.", steps(rng, lines)]
    if rng.random() < 0.5:
        simple = p * (1 + r * n / 100)
        parts.append(wait(rng,
            why=f"if I had used simple interest I would get {p} × (1 + {r}·{n}/100) = {simple:,.2f}, which "
                f"is less, because compounding pays interest on interest. The yearly table is the right model."))
    parts.append(pick(rng, CHECKS).format(
        c=f"the formula P(1 + r)^n = {p} × {1 + r / 100:g}^{n} = {formula:,.2f}, matching the table."))
    parts.append(pick(rng, CONCLUDE).format(a=f"after {n} years the account holds ${formula:,.2f}."))
    return think(rng, parts)


def combinations(rng: random.Random) -> str:
    n = rng.randint(6, 15)
    k = rng.randint(2, min(5, n - 2))
    group = pick(rng, ["a committee", "a team", "a tasting panel", "a relay squad", "a review board"])
    q = f"how many ways can we choose {group} of {k} people from {n} candidates, if order does not matter?"
    num = math.prod(range(n - k + 1, n + 1))
    den = math.factorial(k)
    top = " × ".join(str(i) for i in range(n, n - k, -1))
    bottom = " × ".join(str(i) for i in range(k, 0, -1))
    lines = [
        "order does not matter, so this is C(n, k) = n! / (k! (n − k)!).",
        f"C({n}, {k}) = ({top}) / ({bottom}).",
        f"numerator: {top} = {num}.",
        f"denominator: {k}! = {den}.",
        f"{num} / {den} = {num // den}.",
    ]
    parts = [opener(rng, q), steps(rng, lines)]
    if rng.random() < 0.5:
        parts.append(wait(rng,
            why=f"I should make sure I did not count ordered selections. Ordered ones would be {num}, and each "
                f"group of {k} appears {den} times among them, once per ordering, so dividing by {den} is right."))
    parts.append(pick(rng, CHECKS).format(
        c=f"C({n}, {k}) should equal C({n}, {n - k}) by symmetry, and choosing who is left out gives the same "
          f"count, {math.comb(n, n - k)}."))
    parts.append(pick(rng, CONCLUDE).format(a=f"there are {math.comb(n, k)} ways."))
    return think(rng, parts)


def euclid(rng: random.Random) -> str:
    g = rng.choice([6, 7, 8, 9, 12, 14, 15, 18, 21, 24])
    a, b = g * rng.randint(11, 97), g * rng.randint(5, 60)
    if a < b:
        a, b = b, a
    q = f"what are the greatest common divisor and the least common multiple of {a} and {b}?"
    lines = []
    x, y = a, b
    while y:
        lines.append(f"{x} = {x // y} × {y} + {x % y}.")
        x, y = y, x % y
    gcd = x
    parts = [opener(rng, q),
             "Euclid's algorithm: divide, keep the remainder, repeat until the remainder is zero.",
             steps(rng, lines), f"The last non-zero remainder is {gcd}, so gcd({a}, {b}) = {gcd}."]
    lcm = a * b // gcd
    parts.append(f"For the lcm, use lcm = a·b / gcd = {a} × {b} / {gcd} = {a * b} / {gcd} = {lcm}.")
    parts.append(pick(rng, CHECKS).format(
        c=f"{a} / {gcd} = {a // gcd} and {b} / {gcd} = {b // gcd}; those two share no factor, so {gcd} really is "
          f"the greatest. And {lcm} / {a} = {lcm // a}, {lcm} / {b} = {lcm // b}, both whole."))
    parts.append(pick(rng, CONCLUDE).format(a=f"gcd = {gcd} and lcm = {lcm}."))
    return think(rng, parts)


def recipe(rng: random.Random) -> str:
    base, want = rng.choice([(4, 6), (4, 10), (6, 9), (8, 5), (2, 7), (6, 15), (12, 8)])
    flour, sugar, milk = rng.randrange(150, 600, 25), rng.randrange(40, 250, 10), rng.randrange(100, 700, 50)
    q = (f"a recipe for {base} servings needs {flour} g flour, {sugar} g sugar and {milk} ml milk. What do I "
         f"need for {want} servings, and how many cups of milk is that if a cup is 240 ml?")
    f = want / base
    lines = [
        f"the scale factor is {want} / {base} = {f:.4g}.",
        f"flour: {flour} × {f:.4g} = {flour * f:.1f} g.",
        f"sugar: {sugar} × {f:.4g} = {sugar * f:.1f} g.",
        f"milk: {milk} × {f:.4g} = {milk * f:.1f} ml.",
        f"in cups: {milk * f:.1f} / 240 = {milk * f / 240:.2f} cups.",
    ]
    parts = [opener(rng, q), steps(rng, lines)]
    if rng.random() < 0.4:
        parts.append(wait(rng,
            why=f"I first wrote the factor as {base} / {want} = {base / want:.4g}, which would shrink the recipe. "
                f"We want more servings, so the factor must be above 1 when {want} > {base}, and below 1 otherwise. "
                f"{want} / {base} is right."))
    parts.append(pick(rng, CHECKS).format(
        c=f"the ratio flour : sugar stays {flour} : {sugar} = {flour / sugar:.3f} before and "
          f"{flour * f:.1f} : {sugar * f:.1f} = {flour / sugar:.3f} after."))
    parts.append(pick(rng, CONCLUDE).format(
        a=f"{flour * f:.0f} g flour, {sugar * f:.0f} g sugar and {milk * f:.0f} ml milk, about "
          f"{milk * f / 240:.1f} cups."))
    return think(rng, parts)


def ages(rng: random.Random) -> str:
    a, b = rng.sample(NAMES, 2)
    child = rng.randint(4, 20)
    k = rng.randint(2, 5)
    parent = k * child
    years = rng.randint(3, 15)
    m_num = parent + years
    m_den = child + years
    q = (f"{a} is {k} times as old as {b}. In {years} years the sum of their ages will be "
         f"{parent + child + 2 * years}. How old are they now?")
    lines = [
        f"let {b}'s age now be x; then {a} is {k}x.",
        f"in {years} years: (x + {years}) + ({k}x + {years}) = {parent + child + 2 * years}.",
        f"simplify: {k + 1}x + {2 * years} = {parent + child + 2 * years}, so {k + 1}x = {parent + child}.",
        f"x = {parent + child} / {k + 1} = {child}.",
        f"{a} is {k} × {child} = {parent}.",
    ]
    parts = [opener(rng, q), steps(rng, lines)]
    if rng.random() < 0.4:
        parts.append(wait(rng,
            why=f"I nearly added {years} only once, but both of them get {years} years older, so the sum grows "
                f"by {2 * years}."))
    parts.append(pick(rng, CHECKS).format(
        c=f"now {parent} = {k} × {child}; in {years} years they are {m_num} and {m_den}, summing to "
          f"{m_num + m_den}. Good."))
    parts.append(pick(rng, CONCLUDE).format(a=f"{a} is {parent} and {b} is {child}."))
    return think(rng, parts)


def pipes(rng: random.Random) -> str:
    ta, tb = rng.choice([(3, 6), (4, 12), (5, 20), (6, 3), (2, 8), (9, 18), (10, 15), (12, 4)])
    drain = rng.random() < 0.4
    tc = rng.choice([30, 36, 40, 60]) if drain else 0
    q = f"pipe A fills a tank in {ta} hours and pipe B in {tb} hours."
    if drain:
        q += f" A drain empties the full tank in {tc} hours."
    q += " With everything open, how long does it take to fill the empty tank?"
    rate = 1 / ta + 1 / tb - (1 / tc if drain else 0)
    lcm = math.lcm(ta, tb, tc) if drain else math.lcm(ta, tb)
    num = lcm // ta + lcm // tb - (lcm // tc if drain else 0)
    lines = [
        f"A does 1/{ta} of the tank per hour and B does 1/{tb}.",
        f"over a common denominator of {lcm}: 1/{ta} = {lcm // ta}/{lcm} and 1/{tb} = {lcm // tb}/{lcm}.",
    ]
    if drain:
        lines.append(f"the drain removes 1/{tc} = {lcm // tc}/{lcm} per hour.")
    lines.append(f"net rate: {num}/{lcm} of the tank per hour.")
    lines.append(f"time = {lcm}/{num} = {1 / rate:.3f} hours.")
    parts = [opener(rng, q),
             "Rates add, times do not, so I'll work with rates.", steps(rng, lines)]
    if rng.random() < 0.5:
        parts.append(wait(rng,
            why=f"averaging the times, ({ta} + {tb}) / 2 = {(ta + tb) / 2:g} hours, would be nonsense: two pipes "
                f"together must be faster than the faster pipe alone, so the answer has to be under {min(ta, tb)} "
                f"hours" + ("" if not drain else " unless the drain is strong") + "."))
    parts.append(pick(rng, CHECKS).format(
        c=f"in {1 / rate:.3f} hours A fills {1 / rate / ta:.3f} of the tank and B {1 / rate / tb:.3f}"
          + (f", the drain removes {1 / rate / tc:.3f}" if drain else "")
          + f"; total {1 / rate * rate:.3f}, one full tank."))
    h = 1 / rate
    parts.append(pick(rng, CONCLUDE).format(a=f"about {h:.2f} hours, i.e. {int(h)} h {round((h - int(h)) * 60)} min."))
    return think(rng, parts)


def probability(rng: random.Random) -> str:
    red, blue, green = rng.randint(2, 9), rng.randint(2, 9), rng.randint(1, 6)
    total = red + blue + green
    q = (f"a bag has {red} red, {blue} blue and {green} green marbles. Two are drawn without replacement. "
         f"What is the probability both are red, and that they have different colours?")
    both_red = red * (red - 1) / (total * (total - 1))
    same = (red * (red - 1) + blue * (blue - 1) + green * (green - 1)) / (total * (total - 1))
    lines = [
        f"there are {total} marbles in all.",
        f"P(first red) = {red}/{total}; then {red - 1} red remain out of {total - 1}.",
        f"P(both red) = {red}/{total} × {red - 1}/{total - 1} = {red * (red - 1)}/{total * (total - 1)} "
        f"≈ {both_red:.4f}.",
        f"P(same colour) = [{red}·{red - 1} + {blue}·{blue - 1} + {green}·{green - 1}] / ({total}·{total - 1}) = "
        f"{red * (red - 1) + blue * (blue - 1) + green * (green - 1)}/{total * (total - 1)} ≈ {same:.4f}.",
        f"P(different colours) = 1 − {same:.4f} = {1 - same:.4f}.",
    ]
    parts = [opener(rng, q), steps(rng, lines)]
    if rng.random() < 0.45:
        parts.append(wait(rng,
            why=f"squaring {red}/{total} would be the answer with replacement, {(red / total) ** 2:.4f}. Without "
                f"replacement the second draw has one marble fewer, so {red - 1}/{total - 1} is right."))
    pairs = math.comb(total, 2)
    diff = red * blue + red * green + blue * green
    parts.append(pick(rng, CHECKS).format(
        c=f"count unordered pairs instead: {pairs} pairs in all, {red}·{blue} + {red}·{green} + {blue}·{green} = "
          f"{diff} of them mixed, and {diff}/{pairs} = {diff / pairs:.4f}. It agrees."))
    parts.append(pick(rng, CONCLUDE).format(
        a=f"P(both red) ≈ {both_red:.4f} and P(different colours) ≈ {1 - same:.4f}."))
    return think(rng, parts)


def series(rng: random.Random) -> str:
    a0, d, n = rng.randint(1, 40), rng.randint(2, 13), rng.randint(12, 80)
    last = a0 + (n - 1) * d
    q = f"what is the sum of the first {n} terms of the sequence {a0}, {a0 + d}, {a0 + 2 * d}, ...?"
    s = n * (a0 + last) // 2
    lines = [
        f"it is arithmetic with first term {a0} and common difference {d}.",
        f"the {n}th term is {a0} + ({n} − 1)·{d} = {a0} + {(n - 1) * d} = {last}.",
        f"sum = n (first + last) / 2 = {n} × ({a0} + {last}) / 2 = {n} × {a0 + last} / 2.",
        f"{n} × {a0 + last} = {n * (a0 + last)}, and half of that is {s}.",
    ]
    parts = [opener(rng, q), steps(rng, lines)]
    if rng.random() < 0.4:
        parts.append(wait(rng,
            why=f"I first took the last term as {a0} + {n}·{d} = {a0 + n * d}, which is the ({n + 1})th term. "
                f"The first term already counts as one, so it is ({n} − 1) steps."))
    parts.append(pick(rng, CHECKS).format(
        c=f"the average term is ({a0} + {last}) / 2 = {(a0 + last) / 2:g}, and {n} terms of that average "
          f"give {n * (a0 + last) / 2:g}."))
    parts.append(pick(rng, CONCLUDE).format(a=f"the sum is {s}."))
    return think(rng, parts)


def weekday(rng: random.Random) -> str:
    start = date(2023, 1, 1) + timedelta(days=rng.randint(0, 900))
    add = rng.randint(40, 700)
    end = start + timedelta(days=add)
    days = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
    q = (f"if {start:%d %B %Y} is a {days[start.weekday()]}, what day of the week is it {add} days later, "
         f"and what is the date?")
    lines = [
        f"days of the week repeat every 7 days, so only {add} mod 7 matters for the weekday.",
        f"{add} = 7 × {add // 7} + {add % 7}.",
        f"{days[start.weekday()]} plus {add % 7} days is {days[(start.weekday() + add % 7) % 7]}.",
        f"for the date, walk month by month from {start:%d %B %Y}: the result is {end:%d %B %Y}.",
    ]
    parts = [opener(rng, q), steps(rng, lines)]
    crossed = [date(y, 2, 29) for y in range(start.year, end.year + 1) if y % 4 == 0 and (y % 100 or y % 400 == 0)]
    if any(start < d <= end for d in crossed):
        parts.append("Did the range cross 29 February? It did, and the date count includes that day; the weekday "
                     "rule does not care, since it only uses the number of days.")
    if rng.random() < 0.35:
        parts.append(wait(rng,
            why=f"I started counting with day 1 on {start:%d %B}, which would land one day short. "
                f"\"{add} days later\" means the start day is day 0."))
    parts.append(pick(rng, CHECKS).format(c=f"{end:%d %B %Y} is indeed a {days[end.weekday()]}."))
    parts.append(pick(rng, CONCLUDE).format(a=f"it is a {days[end.weekday()]}, {end:%d %B %Y}."))
    return think(rng, parts)


def trace_loop(rng: random.Random) -> str:
    xs = [rng.randint(-9, 30) for _ in range(rng.randint(5, 8))]
    limit = rng.randint(5, 20)
    q = (f"the user's function is supposed to return the sum of the values in {xs} that are greater than {limit}, "
         f"but it returns the wrong number. The loop is `for i in range(1, len(xs)): if xs[i] > {limit}: "
         f"total += xs[i]`. What is wrong?")
    lines = []
    total = 0
    for i in range(1, len(xs)):
        took = xs[i] > limit
        if took:
            total += xs[i]
        lines.append(f"i = {i}: xs[{i}] = {xs[i]}, " + (f"greater than {limit}, total = {total}." if took else
                                                        f"not greater than {limit}, total stays {total}."))
    right = sum(x for x in xs if x > limit)
    parts = [opener(rng, q), "Let me trace the loop by hand.", steps(rng, lines),
             f"So the function returns {total}."]
    if xs[0] > limit:
        parts.append(f"But xs[0] = {xs[0]} is also greater than {limit}, and the loop never looks at it, because "
                     f"range(1, len(xs)) starts at 1. The correct sum is {total} + {xs[0]} = {right}.")
        verdict = (f"the loop skips index 0; use range(len(xs)) or iterate over xs directly. "
                   f"The right answer is {right}.")
    else:
        parts.append(f"xs[0] = {xs[0]} is not greater than {limit}, so for this input skipping it does no harm, and "
                     f"{total} is actually correct here. The bug shows only when the first value passes the test.")
        verdict = (f"the loop starts at index 1 and would miss xs[0]; for this input the result {right} happens "
                   f"to be right, but the fix is still range(len(xs)).")
    parts.append(pick(rng, CHECKS).format(
        c=f"summing the qualifying values directly: {' + '.join(str(x) for x in xs if x > limit) or '0'} = {right}."))
    parts.append(pick(rng, CONCLUDE).format(a=verdict))
    return think(rng, parts)


def primes(rng: random.Random) -> str:
    n = rng.choice([rng.randrange(101, 999, 2), rng.randint(11, 60) * rng.choice([7, 11, 13, 17, 19, 23])])
    q = f"is {n} a prime number?"
    lines = [f"√{n} ≈ {math.sqrt(n):.2f}, so I only need to try primes up to {math.isqrt(n)}."]
    factor = None
    for p in [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31]:
        if p > math.isqrt(n):
            break
        if n % p == 0:
            lines.append(f"{n} / {p} = {n // p} exactly, so {p} divides it.")
            factor = p
            break
        lines.append(f"{n} / {p} = {n // p} remainder {n % p}; not divisible.")
    parts = [opener(rng, q), "Trial division.", steps(rng, lines)]
    if factor is None:
        parts.append(pick(rng, CHECKS).format(c=f"no prime up to {math.isqrt(n)} divides {n}."))
        parts.append(pick(rng, CONCLUDE).format(a=f"{n} is prime."))
    else:
        parts.append(pick(rng, CHECKS).format(c=f"{factor} × {n // factor} = {factor * (n // factor)}."))
        parts.append(pick(rng, CONCLUDE).format(a=f"{n} is not prime; {n} = {factor} × {n // factor}."))
    return think(rng, parts)


def geometry(rng: random.Random) -> str:
    a, b = rng.choice([(3, 4), (5, 12), (8, 15), (7, 24), (6, 8), (9, 12), (20, 21), (12, 16)])
    k = rng.randint(1, 4)
    a, b = a * k, b * k
    c = math.hypot(a, b)
    q = (f"a rectangular garden is {a} m by {b} m. How long is the diagonal path across it, how much fence goes "
         f"around it, and what is its area?")
    lines = [
        f"the diagonal is the hypotenuse of a right triangle with legs {a} and {b}.",
        f"{a}² + {b}² = {a * a} + {b * b} = {a * a + b * b}.",
        f"√{a * a + b * b} = {c:g} m.",
        f"perimeter: 2 × ({a} + {b}) = {2 * (a + b)} m.",
        f"area: {a} × {b} = {a * b} m².",
    ]
    parts = [opener(rng, q), steps(rng, lines)]
    if rng.random() < 0.4:
        parts.append(wait(rng,
            why=f"I wrote {a} + {b} = {a + b} for the diagonal at first, but a straight diagonal is shorter than "
                f"walking along two sides; Pythagoras gives {c:g}, which is less than {a + b}, as it must be."))
    parts.append(pick(rng, CHECKS).format(
        c=f"the diagonal {c:g} is longer than the longer side {max(a, b)} and shorter than {a + b}. Plausible."))
    parts.append(pick(rng, CONCLUDE).format(a=f"diagonal {c:g} m, fence {2 * (a + b)} m, area {a * b} m²."))
    return think(rng, parts)


def binary(rng: random.Random) -> str:
    n = rng.randint(37, 1500)
    q = f"convert {n} to binary and to hexadecimal."
    lines = []
    x = n
    while x:
        parity = "odd" if x % 2 else "even"
        lines.append(pick(rng, [
            f"{x} ÷ 2 = {x // 2} remainder {x % 2}.",
            f"halve {x}: that gives {x // 2}, with {x % 2} left over.",
            f"{x} is {parity}, so the bit is {x % 2}; then {x} // 2 = {x // 2}.",
        ]))
        x //= 2
    parts = [opener(rng, q), "Repeated division by 2, reading remainders "
             "from the bottom up.", steps(rng, lines),
             f"Reading the remainders upwards: {n:b}."]
    groups = f"{n:b}".zfill((len(f"{n:b}") + 3) // 4 * 4)
    nibbles = [groups[i:i + 4] for i in range(0, len(groups), 4)]
    parts.append(f"For hex, group bits in fours from the right: {' '.join(nibbles)} → "
                 f"{' '.join(f'{int(g, 2):X}' for g in nibbles)}, so {n:#x}.")
    pw = [2 ** i for i, bit in enumerate(reversed(f"{n:b}")) if bit == "1"]
    parts.append(pick(rng, CHECKS).format(c=f"{' + '.join(str(p) for p in reversed(pw))} = {sum(pw)}."))
    parts.append(pick(rng, CONCLUDE).format(a=f"{n} = 0b{n:b} = {n:#x}."))
    return think(rng, parts)


def stats_median(rng: random.Random) -> str:
    xs = [rng.randint(1, 99) for _ in range(rng.choice([7, 8, 9, 10, 11]))]
    q = f"what are the mean and the median of {', '.join(map(str, xs))}?"
    s = sorted(xs)
    n = len(xs)
    med = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    lines = [
        f"sum: {' + '.join(map(str, xs))} = {sum(xs)}.",
        f"mean: {sum(xs)} / {n} = {sum(xs) / n:.3f}.",
        f"sorted: {', '.join(map(str, s))}.",
        (f"{n} values, odd, so the median is the middle one, position {n // 2 + 1}: {med}." if n % 2 else
         f"{n} values, even, so the median is the average of positions {n // 2} and {n // 2 + 1}: "
         f"({s[n // 2 - 1]} + {s[n // 2]}) / 2 = {med:g}."),
    ]
    parts = [opener(rng, q), steps(rng, lines)]
    if rng.random() < 0.45:
        parts.append(wait(rng,
            why=f"I read off the middle of the unsorted list, {xs[n // 2]}, at first. The median needs the sorted "
                f"order."))
    parts.append(pick(rng, CHECKS).format(
        c=f"{sum(1 for x in xs if x < med)} values are below {med:g} and {sum(1 for x in xs if x > med)} above."))
    parts.append(pick(rng, CONCLUDE).format(a=f"mean ≈ {sum(xs) / n:.2f}, median = {med:g}."))
    return think(rng, parts)


def ordering(rng: random.Random) -> str:
    people = rng.sample(NAMES, 4)
    order = people[:]  # tallest first
    clues = [f"{order[0]} is taller than {order[2]}", f"{order[1]} is shorter than {order[0]}",
             f"{order[2]} is taller than {order[3]}", f"{order[1]} is taller than {order[2]}"]
    rng.shuffle(clues)
    q = (f"four friends compare heights. {'; '.join(clues)}. Who is tallest, and what is the full order?")
    lines = [
        f"from \"{order[1]} is shorter than {order[0]}\" and \"{order[0]} is taller than {order[2]}\", "
        f"it follows that {order[0]} is above both {order[1]} and {order[2]}.",
        f"{order[1]} is taller than {order[2]}, and {order[2]} is taller than {order[3]}; since taller-than "
        f"chains, that means {order[1]} > {order[2]} > {order[3]}.",
        f"{order[0]} is above {order[1]}, so therefore {order[0]} must be at the top.",
        "check the remaining clue against this chain: it is consistent, so there is no contradiction.",
    ]
    parts = [opener(rng, q), "Let me chain the comparisons.", steps(rng, lines)]
    if rng.random() < 0.5:
        parts.append(wait(rng,
            why=f"I assumed {order[3]} might be second because nothing says {order[3]} is shorter than "
                f"{order[1]} directly. But {order[3]} < {order[2]} < {order[1]}, so by transitivity {order[3]} "
                f"is last."))
    parts.append(pick(rng, CHECKS).format(c="every clue holds for the order " + " > ".join(order) + "."))
    parts.append(pick(rng, CONCLUDE).format(a=f"{order[0]} is tallest; the order is {', '.join(order)}."))
    return think(rng, parts)


def last_digit(rng: random.Random) -> str:
    base = rng.choice([2, 3, 7, 8, 13, 17, 12, 19, 23])
    exp = rng.randint(20, 999)
    cycle = []
    x = base % 10
    while x not in cycle:
        cycle.append(x)
        x = x * base % 10
    q = f"what is the last digit of {base}^{exp}?"
    lines = [f"only the last digit of the base matters: {base % 10}."]
    powers = ", ".join(f"{base % 10}^{i + 1} ends in {d}" for i, d in enumerate(cycle))
    lines.append(f"the last digits cycle: {powers}, then it repeats.")
    lines.append(f"the cycle length is {len(cycle)}; {exp} mod {len(cycle)} = {exp % len(cycle)}.")
    pos = (exp - 1) % len(cycle)
    lines.append(f"so {base}^{exp} ends like position {pos + 1} of the cycle: {cycle[pos]}.")
    parts = [opener(rng, q), steps(rng, lines)]
    if rng.random() < 0.4 and exp % len(cycle) == 0:
        parts.append(wait(rng,
            why=f"a remainder of 0 does not mean position 0: it means the end of a full cycle, position "
                f"{len(cycle)}."))
    parts.append(pick(rng, CHECKS).format(c=f"computing pow({base}, {exp}, 10) gives {pow(base, exp, 10)}."))
    parts.append(pick(rng, CONCLUDE).format(a=f"the last digit is {pow(base, exp, 10)}."))
    return think(rng, parts)


def estimate(rng: random.Random) -> str:
    tps = rng.choice([28, 32, 45, 60, 67, 90, 113, 138, 216, 256])
    tokens = rng.choice([256, 512, 1000, 1500, 2750, 4000])
    ttft = rng.choice([0.06, 0.2, 0.45, 1.2, 1.5])
    q = (f"a server decodes at {tps} tokens per second after a time to first token of {ttft} s. How long does a "
         f"{tokens}-token answer take, and what rate does the client see?")
    decode = (tokens - 1) / tps
    total = ttft + decode
    lines = [
        f"the first token arrives at {ttft} s; the remaining {tokens - 1} tokens take {tokens - 1} / {tps} = "
        f"{decode:.2f} s.",
        f"total time: {ttft} + {decode:.2f} = {total:.2f} s.",
        f"client-side rate: {tokens} / {total:.2f} = {tokens / total:.1f} tokens per second.",
    ]
    parts = [opener(rng, q), steps(rng, lines)]
    if rng.random() < 0.5:
        parts.append(wait(rng,
            why=f"dividing {tokens} by {tps} and stopping there ignores the prefill. It matters little for long "
                f"answers but a lot for short ones: with {ttft} s of prefill and only 16 tokens the client would "
                f"see {16 / (ttft + 15 / tps):.1f} tokens per second."))
    parts.append(pick(rng, CHECKS).format(
        c=f"the client rate {tokens / total:.1f} must be below the decode rate {tps}, and it is."))
    parts.append(pick(rng, CONCLUDE).format(a=f"about {total:.1f} s in all, {tokens / total:.1f} tokens per second "
                                              f"as the client measures it."))
    return think(rng, parts)


def spec_decode(rng: random.Random) -> str:
    step_ms = rng.choice([20, 24, 32, 40, 55, 80, 120, 155])
    accept = rng.choice([2.9, 3.2, 3.6, 4.0, 4.4, 5.0, 5.6])
    later = round(accept * rng.uniform(0.5, 0.8), 1)
    slower = step_ms + rng.choice([10, 20, 35, 50])
    q = (f"with speculative decoding each target step takes {step_ms} ms and accepts {accept} tokens on average, "
         f"bonus token included. What decode rate is that, and what happens if acceptance falls to {later} and "
         f"steps slow to {slower} ms later in the generation?")
    r1 = accept * 1000 / step_ms
    r2 = later * 1000 / slower
    lines = [
        f"tokens per second = tokens per step × steps per second = {accept} × (1000 / {step_ms}).",
        f"1000 / {step_ms} = {1000 / step_ms:.2f} steps per second, so {accept} × {1000 / step_ms:.2f} = "
        f"{r1:.1f} tok/s.",
        f"later: 1000 / {slower} = {1000 / slower:.2f} steps per second, times {later} = {r2:.1f} tok/s.",
        f"the ratio is {r2:.1f} / {r1:.1f} = {r2 / r1:.2f}, a drop of {100 * (1 - r2 / r1):.0f}%.",
    ]
    parts = [opener(rng, q), steps(rng, lines)]
    split_a = later / accept
    split_s = step_ms / slower
    parts.append(f"How much of that is acceptance and how much is step time? Acceptance alone scales the rate by "
                 f"{later} / {accept} = {split_a:.2f}; step time alone by {step_ms} / {slower} = {split_s:.2f}; "
                 f"together {split_a:.2f} × {split_s:.2f} = {split_a * split_s:.2f}, matching the ratio.")
    if rng.random() < 0.5:
        parts.append(wait(rng,
            why=f"a short burst measured at the start would report {r1:.1f} tok/s and hide the drop entirely; the "
                f"average over a long generation sits between {r2:.1f} and {r1:.1f}, closer to {r2:.1f} if the "
                f"slow phase is longer."))
    parts.append(pick(rng, CHECKS).format(
        c=f"{later} tokens every {slower} ms is one token every {slower / later:.1f} ms, and 1000 / "
          f"{slower / later:.1f} = {1000 / (slower / later):.1f} tok/s."))
    parts.append(pick(rng, CONCLUDE).format(a=f"{r1:.1f} tok/s at first and {r2:.1f} tok/s later, "
                                              f"{100 * (1 - r2 / r1):.0f}% slower."))
    return think(rng, parts)


REASONING: list[Callable[[random.Random], str]] = [
    shopping, trains, linear, system2, compound, combinations, euclid, recipe, ages, pipes, probability, series,
    weekday, trace_loop, primes, geometry, binary, stats_median, ordering, last_digit, estimate, spec_decode,
]


def reasoning_corpus(count: int = 110, seed: int = 20240517) -> str:
    rng = random.Random(seed)
    units = []
    for i in range(count):
        units.append(REASONING[(i * 8 + i // len(REASONING)) % len(REASONING)](rng))
    return SEPARATOR.join(units) + "\n"


# -- repetitive ---------------------------------------------------------------------------------

SERVICES = [
    "checkout", "billing", "search", "auth", "inventory", "shipping", "catalog", "payments", "ledger", "mailer",
    "thumbnailer", "scheduler", "gateway", "recommender", "profile", "reports", "notifier", "exporter",
    "importer", "pricing", "geocoder", "uploads", "sessions", "metrics",
]
# Repetitive blocks are small snapshots replayed as they would be re-sent or re-rendered: the
# same status board on every refresh, a rota that repeats each week, a poll answered alike. A
# continuation copies earlier text, which is what an n-gram drafter exploits. Rows hold no
# counters or clocks, so even a very small model copies them instead of extrapolating a sequence.

DEPOTS = ["north", "south", "east", "west", "harbour", "airport", "central", "river", "hill", "market"]
PEOPLE = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory", "oscar"]
DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]


def depot_board(rng: random.Random, service: str) -> tuple[list[str], list[str]]:
    head = [f"{service} depot board, refreshed every minute", "| depot | trucks | state |", "|---|---|---|"]
    return head, [f"| {d} | {rng.randint(2, 60)} | {rng.choice(['ok', 'late', 'held', 'full'])} |"
                  for d in rng.sample(DEPOTS, rng.randint(4, 6))]


def weekly_rota(rng: random.Random, service: str) -> tuple[list[str], list[str]]:
    days = DAYS[:rng.randint(5, 7)]
    return [f"{service} on-call rota, the same every week"], [
        f"{d} {rng.choice(['08:00', '12:00', '20:00'])} {p} desk {rng.randint(1, 9)}"
        for d, p in zip(days, rng.sample(PEOPLE, len(days)), strict=True)]


def health_poll(rng: random.Random, service: str) -> tuple[list[str], list[str]]:
    nodes = rng.sample(["alpha", "bravo", "delta", "echo", "golf", "kilo", "lima", "oscar"], rng.randint(3, 5))
    return [f"{service} health poll, one answer per node per poll"], [
        f"{service}-{n}: {rng.choice(['healthy', 'healthy', 'degraded'])}, zone {rng.choice('abc')}, "
        f"version {rng.randint(1, 4)}.{rng.randint(0, 9)}" for n in nodes]


def price_list(rng: random.Random, service: str) -> tuple[list[str], list[str]]:
    items = rng.sample(["espresso", "latte", "tea", "scone", "bagel", "juice", "muffin", "soup"], rng.randint(4, 6))
    return [f"{service} price list, printed on every receipt", "item,size,price"], [
        f"{it},{rng.choice(['small', 'large'])},{rng.randint(150, 650) / 100:.2f}" for it in items]


REPETITIVE = [depot_board, weekly_rota, health_poll, price_list]


def replayed(make: Callable[[random.Random, str], tuple[list[str], list[str]]], rng: random.Random,
             service: str) -> str:
    """One block: a snapshot's header, then its rows replayed 24-32 times (long: short prompts stay in one block)."""
    head, rows = make(rng, service)
    return "\n".join(head + rows * rng.randint(24, 32))


def repetitive_corpus(count: int = 24, seed: int = 7) -> str:
    rng = random.Random(seed)
    units = [replayed(REPETITIVE[i % len(REPETITIVE)], rng, SERVICES[(i * 5) % len(SERVICES)]) for i in range(count)]
    return SEPARATOR.join(units) + "\n"


def write_corpora(out: Path) -> list[Path]:
    """Write the generated corpora into ``out``; return their paths."""
    out.mkdir(parents=True, exist_ok=True)
    files = {"reasoning.txt": reasoning_corpus(), "repetitive.txt": repetitive_corpus()}
    paths = []
    for name, text in files.items():
        path = out / name
        # newline="\n": the same bytes on every platform, so the shipped files compare exactly
        with path.open("w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> None:
    """Command line: regenerate the corpora into the package's data folder or ``--out``."""
    parser = argparse.ArgumentParser(description="Regenerate the generated prompt corpora.")
    parser.add_argument("--out", type=Path, default=DATA, help=f"folder to write into (default: {DATA})")
    for path in write_corpora(parser.parse_args(argv).out):
        print(path)


if __name__ == "__main__":
    main()
