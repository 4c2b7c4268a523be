#!/usr/bin/env python3
"""Writes corpus.jsonl: the texts whose HF encodings are the tokenizer's golden data.

Run here (no dependencies); make_golden.py then encodes them with HF `tokenizers` on a machine that has it.
"""
import json
import random

texts = [
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces and trailing   ",
    "Tabs\tand\tnewlines\nmixed\r\nwith CRLF\r\n\r\nand blank lines\n\n\n",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }  // dot product",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;",
    "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\"}}",
    "https://example.com/path/to/page?query=1&lang=en#section-2",
    "user.name+tag@example-mail.co.uk",
    "我爱北京天安门，天安门上太阳升。",
    "深度求索（DeepSeek）是一家人工智能公司。",
    "日本語のテキスト：ひらがな、カタカナ、漢字を含む。",
    "한국어 문장입니다. 안녕하세요, 만나서 반갑습니다!",
    "مرحبا بالعالم! هذه جملة باللغة العربية.",
    "नमस्ते दुनिया, यह हिंदी में एक वाक्य है।",
    "Привет, мир! Съешь же ещё этих мягких французских булок.",
    "Ελληνικά: Γειά σου Κόσμε",
    "עברית: שלום עולם",
    "ไทย: สวัสดีชาวโลก",
    "Emoji: 😀😃😄 👍🏽 ❤️ 🇺🇸🇯🇵🇩🇪 👨‍👩‍👧‍👦 🏳️‍🌈 🧑🏿‍💻",
    "Full-width: ＡＢＣ１２３！？　ｆｕｌｌ　ｗｉｄｔｈ",
    "Combining: e\u0301 a\u0300 n\u0303 o\u0308 — Zalgo: Z\u0351\u036b\u0343a\u0352l\u0352g\u0310o\u0346",
    "Precomposed vs decomposed: \u00e9 vs e\u0301, \u00c5 vs A\u030a, \ufb01 ligature",
    "Math: ∀x∈ℝ, x² ≥ 0; ∑_{i=1}^{n} i = n(n+1)/2; √2 ≈ 1.41421356",
    "Currency: $100, €50, £30, ¥1000, ₹500, ₿0.001",
    "Punctuation!!! ??? ... --- ___ *** ### @@@ ^^^ ~~~ ``` '''",
    "Quotes: “smart” ‘single’ «guillemets» „German“",
    "Control-token lookalikes: <｜User｜> <｜Assistant｜> <｜end▁of▁sentence｜> <｜begin▁of▁sentence｜>",
    "Near lookalikes: <|User|> <｜User> <｜User｜ <｜tool▁calls▁begin｜>text<｜tool▁sep｜>",
    "Text with <｜place▁holder▁no▁0｜> inside and <think>reasoning</think> tags",
    "Pneumonoultramicroscopicsilicovolcanoconiosis " * 3,
    "a" * 300,
    "ab" * 150,
    "xyz" * 100 + " " + "-" * 64 + "=" * 64,
    "supercalifragilisticexpialidocious_" + "very_long_identifier_name_" * 10,
    "Zero-width: a\u200bb\u200cc\u200dd\ufeffe",
    "Non-breaking\u00a0space and\u2003em space and\u3000ideographic space",
    "Line\u2028separator and paragraph\u2029separator",
    "Surrogates-free astral: 𝕳𝖊𝖑𝖑𝖔 𝒲ℴ𝓇𝓁𝒹 🀄 𓀀",
    "Mixed: English中文한국어العربيةहिन्दी😀123abc",
    "   \n   \n\t\t\n",
    " ",
    "\n",
    "",
    "CamelCaseWordsAndsnake_case_words and kebab-case-words",
    "I'm you're he's we'll they'd it's can't won't",
    "ALL CAPS SHOUTING AND lower case whisper",
    "Version 1.2.3-beta+build.456 released on 2024-01-15T10:30:00Z",
    "IPv4 192.168.0.1 and IPv6 2001:0db8:85a3::8a2e:0370:7334",
    "Hex 0xDEADBEEF, binary 0b101010, octal 0o755, float 6.02e23",
]

# Numbers of every length, with and without separators.
for n in range(1, 25):
    texts.append("".join(str((i * 7 + n) % 10) for i in range(n)))
texts.append("1,234,567.89 and 1 234 567 and 1_000_000")
texts.append(" ".join(str(10 ** k) for k in range(0, 20)))

# Whitespace runs of every length before words and at the end.
for n in range(1, 12):
    texts.append(" " * n + "word" + " " * n)
    texts.append("a" + "\t" * n + "b")
    texts.append("x" + "\n" * n + "y")

# Random mixes drawn from the pieces above (fixed seed, so the corpus is stable).
rng = random.Random(20261129)
pieces = [t for t in texts if t]
for _ in range(60):
    k = rng.randint(2, 5)
    texts.append(rng.choice(["", " ", "\n", "  "]).join(rng.choice(pieces)[: rng.randint(1, 80)] for _ in range(k)))

with open("corpus.jsonl", "w", encoding="utf-8") as f:
    for t in texts:
        f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
print(f"wrote {len(texts)} texts")
