"""Hand-written texts of each content kind, for the classifier and tokenizer tests."""

from __future__ import annotations

PROSE = {
    "fiction": """The rain had not stopped for three days when Mara finally walked down to the harbour. The boats
sat low in the grey water, their ropes creaking against the posts, and the gulls had given up
circling and huddled on the roofs of the fish sheds. She pulled her coat tighter and looked for
her father's boat among the others. It was not there. An old man mending nets under an awning
told her it had gone out before dawn with two strangers aboard, men who paid in silver and did
not give their names. She thanked him and stood for a long time at the end of the pier, watching
the horizon where the clouds met the sea, until the light began to fade and the lamps along the
quay were lit one by one.""",
    "news": """City officials announced on Tuesday that the long-delayed renovation of the central library will
begin next spring, ending years of debate over the cost and scope of the project. The plan
includes a new reading room, expanded children's services and repairs to the roof, which has
leaked during heavy storms. Council members approved the budget after a lengthy public meeting
in which residents spoke both for and against the proposal. Supporters said the library is one
of the few public spaces open to everyone, while critics questioned whether the money would be
better spent on schools and roads. The mayor said construction should take about eighteen months
and that a temporary branch will open in the old post office building during the work.""",
    "encyclopedia": """The common swift is a medium-sized bird that spends most of its life in the air. It breeds across
Europe and Asia and migrates to southern Africa for the winter, covering thousands of kilometres
each year. Swifts feed on insects caught in flight, drink by skimming the surface of lakes and
rivers, and can even sleep while gliding at high altitude. Their legs are very short, and they
rarely land except at the nest, which is built in holes in cliffs or buildings from feathers and
plant material glued together with saliva. Populations have declined in many regions as older
buildings are renovated and nesting sites disappear, and conservation groups now encourage the
installation of special nest boxes under the eaves of new houses.""",
    "letter": """Dear Helen, thank you so much for the lovely parcel, which arrived on Friday just as we were
sitting down to dinner. The children were delighted with the books, and Tom has already read the
one about the lighthouse keeper twice. We have had a busy autumn here. The garden gave us more
apples than we could possibly eat, so I spent a week making jam and chutney, and the kitchen still
smells of cinnamon. Paul has started his new job at the hospital and seems to enjoy it, although
the hours are long. We hope you will be able to visit in December when the house is quieter.
With love from all of us, Anna""",
}

CODE = {
    "python": '''import json
from pathlib import Path


class Cache:
    """A tiny JSON-backed cache."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._data: dict[str, str] = {}
        if path.exists():
            self._data = json.loads(path.read_text())

    def get(self, key: str, default: str | None = None) -> str | None:
        return self._data.get(key, default)

    def put(self, key: str, value: str) -> None:
        self._data[key] = value
        self.path.write_text(json.dumps(self._data, indent=2))


def main(argv: list[str]) -> int:
    cache = Cache(Path(argv[1]))
    for item in argv[2:]:
        k, _, v = item.partition("=")
        if v:
            cache.put(k, v)
        else:
            print(cache.get(k))
    return 0
''',
    "c": '''#include <stdio.h>
#include <stdlib.h>

typedef struct node {
    int value;
    struct node *next;
} node_t;

static node_t *push(node_t *head, int value) {
    node_t *n = malloc(sizeof(*n));
    if (n == NULL) {
        perror("malloc");
        exit(1);
    }
    n->value = value;
    n->next = head;
    return n;
}

int main(void) {
    node_t *list = NULL;
    for (int i = 0; i < 10; i++) {
        list = push(list, i * i);
    }
    for (node_t *p = list; p != NULL; p = p->next) {
        printf("%d\\n", p->value);
    }
    return 0;
}
''',
    "javascript": '''const express = require("express");
const app = express();

app.use(express.json());

const users = new Map();

app.post("/users", (req, res) => {
  const { name, email } = req.body;
  if (!name || !email) {
    return res.status(400).json({ error: "name and email are required" });
  }
  const id = users.size + 1;
  users.set(id, { id, name, email });
  res.status(201).json(users.get(id));
});

app.get("/users/:id", (req, res) => {
  const user = users.get(Number(req.params.id));
  if (user === undefined) {
    return res.status(404).end();
  }
  res.json(user);
});

app.listen(3000, () => console.log("listening on 3000"));
''',
    "rust": '''use std::collections::HashMap;

#[derive(Debug, Clone)]
pub struct Counter {
    counts: HashMap<String, usize>,
}

impl Counter {
    pub fn new() -> Self {
        Self { counts: HashMap::new() }
    }

    pub fn add(&mut self, word: &str) {
        *self.counts.entry(word.to_lowercase()).or_insert(0) += 1;
    }

    pub fn top(&self, n: usize) -> Vec<(&String, &usize)> {
        let mut v: Vec<_> = self.counts.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1));
        v.into_iter().take(n).collect()
    }
}

fn main() {
    let mut c = Counter::new();
    for w in "the cat and the hat".split_whitespace() {
        c.add(w);
    }
    println!("{:?}", c.top(2));
}
''',
}

REASONING = {
    "math": """Let's solve this step by step. We need the number of apples left after Sam gives away a third of
his apples and then eats two. Sam starts with 27 apples. First, a third of 27 is 27 / 3 = 9, so he
gives away 9 apples and has 27 - 9 = 18 left. Then he eats 2, so 18 - 2 = 16. Wait, let's check
the wording again: he gives a third to each of his two friends, not a third in total. So he gives
away 2 * 9 = 18 apples, which leaves 27 - 18 = 9. Then he eats 2, so 9 - 2 = 7. Let me verify:
9 + 9 + 2 + 7 = 27, which matches the total. Therefore the answer is 7 apples.""",
    "logic": """We are told that every knight tells the truth and every knave lies. A says that B is a knave, and B
says that A and C are of the same kind. Suppose A is a knight. Then B is a knave, because A tells
the truth, so B's statement is false, which means A and C are of different kinds, hence C is a
knave. Now check the other case: suppose A is a knave. Then B is a knight, since A's claim is a
lie, so B's statement is true, and A and C are the same kind, so C is a knave too. Wait, both
cases seem consistent, so let's look at C's statement again. C says that A is a knight. If C is a
knave, that statement is false, so A is a knave. Therefore only the second case holds: A is a
knave, B is a knight and C is a knave. Let me verify once more that no statement contradicts this.""",
    "cot": """Hmm, the question asks how long the train takes to cover the whole distance. The distance is 240
km and the speed is 80 km per hour for the first half, then 60 km per hour for the second half.
So the first half is 120 km, which takes 120 / 80 = 1.5 hours. The second half is also 120 km, so
it takes 120 / 60 = 2 hours. Then the total time is 1.5 + 2 = 3.5 hours. But wait, is the average
speed 70? Let's check: 240 / 3.5 is about 68.6, not 70, because the train spends more time at the
slower speed. That means the simple average of the two speeds is wrong here. So the answer is 3.5
hours, and the average speed is about 68.6 km per hour. Let me double-check the arithmetic step by
step: 1.5 + 2 = 3.5, and 3.5 * 68.6 is about 240. Yes, that is consistent.""",
}

REPETITIVE = {
    "sentence": "All work and no play makes Jack a dull boy. " * 40,
    "counting": ", ".join(f"item {i}" for i in range(1, 300)),
    "log": "\n".join(f"2024-05-01 12:00:{i % 60:02d} INFO worker-{i % 4} processed request id={1000 + i} in 12 ms"
                     for i in range(120)),
    "tiled": (PROSE["news"] + "\n\n") * 6,
    "list": "\n".join(f"- the quick brown fox jumps over the lazy dog (line {i})" for i in range(80)),
}

ALL = {"prose": PROSE, "code": CODE, "reasoning": REASONING, "repetitive": REPETITIVE}
