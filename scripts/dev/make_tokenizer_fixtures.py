#!/usr/bin/env python3
"""Writes tests/fixtures/tokenizers/*.json: reference encodings by the Hugging Face `tokenizers`
library, which tests/engine/model/test_tokenizer.cpp compares the C++ Tokenizer against.

Development tool only (CI never runs Python). Needs `tokenizers` and `transformers`, e.g.
  python3 -m venv /tmp/venv-tok && /tmp/venv-tok/bin/pip install tokenizers transformers
  /tmp/venv-tok/bin/python scripts/dev/make_tokenizer_fixtures.py --zipmoe build/app/zipmoe
Inputs: ../shared/data/models/{qwen1.5-moe,switch-large-128} (read, never copied) and the tokenizers
of generated test models (`zipmoe make-model --family F --preset tiny DIR`). Each fixture records
only strings and expected ids/decodings, never a vocabulary.
"""
import argparse
import json
import os
import subprocess
import tempfile

from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "data", "models")
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizers")

# A DeepSeek-style pre-tokenizer (Sequence of Splits with letter/punctuation classes, CJK ranges and
# digit groups, then ByteLevel without regex), applied to the Qwen vocabulary to exercise the generic
# Split machinery against the library.
DEEPSEEK_STYLE_PRE = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "[\r\n]"}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕＡ-Ｚａ-ｚ𐐀-𐑏]+"}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": "\\s?[!-/:-~！-／：-～‘-‟　-。]+"}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": "\\s+$"}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": "[一-龥ࠀ-一가-퟿]+"}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    ],
}


def test_strings(specials):
    s = [
        "", " ", "  ", "\n", "\r\n", "\t", "a", "Hello world", "Hello, world!", "The quick brown fox jumps over the lazy dog.",
        "It's a test. I'm sure they're right, we've seen it, you'll see, he'd know.",
        "IT'S LOUD. I'M HERE. THEY'RE. WE'VE. YOU'LL. HE'D.", "It'S mIxEd'Ll 'D 'Re",
        "don't won't can't shouldn't y'all 'twas rock'n'roll",
        "def f(x):\n    return x * 2\n\n\nclass A:\n\tpass\n",
        "if (a && b) { return c; }\n    else {\n        x += 1;\n    }",
        "    leading spaces", "trailing spaces    ", "multiple     inner      spaces", "tabs\t\tand\tspaces \t mixed",
        "line1\nline2\r\nline3\rline4", "\n\n\n", "\r\n\r\n", "   \n   \n", "a \n b", " \t\n x",
        "0", "7", "42", "123", "1234", "12345", "3.14159265358979", "1,000,000", "2024-06-01", "+49 (0)30 1234567",
        "99999999999999999999999999999", "0x1F4A9", "v1.2.3-rc4", "1st 2nd 3rd 4th", "½ ¾ ² ³ ①②③ Ⅻ",
        "!!!", "?!?!", "...", "---", "***bold***", "(parens) [brackets] {braces} <angles>", "@user #hashtag $100 50% ^_^ ~tilde~",
        "\"quoted\" 'single' `back`", "a/b\\c|d", "Ellipsis… and — dashes – too", "«guillemets» „German“ ‘curly’",
        "café", "cafe\u0301", "naïve résumé", "nai\u0308ve re\u0301sume\u0301", "Å Å Å", "ﬁ ﬂ ﬀ", "Ǆ ǅ ǆ",
        "Ångström", "A\u030Angstro\u0308m", "Ñandú", "N\u0303andu\u0301", "Straße", "ẞ", "İstanbul ıi", "Σίσυφος ΣΊΣΥΦΟΣ",
        "Привет, мир! Как дела?", "Ελληνικά κείμενα", "Україна", "ქართული", "Հայերեն", "日本語のテキスト",
        "中文文本测试，包括标点。", "한국어 텍스트", "ｆｕｌｌｗｉｄｔｈ ＡＢＣ １２３", "ｶﾀｶﾅ", "中文English混合123",
        "مرحبا بالعالم", "שלום עולם", "हिन्दी पाठ", "ภาษาไทย", "Tiếng Việt có dấu", "e\u0300\u0301\u0302 stacked",
        "a\u0328\u0301 ogonek", "\u0301leading combining", "emoji 😀", "👍🏽 thumbs", "👨‍👩‍👧‍👦 family", "🏳️‍🌈 flag", "🇩🇪🇫🇷 flags",
        "❤️ heart", "☕ coffee", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math", "𝟘𝟙𝟚", "🤖🤖🤖", "a😀b😀c",
        "control\x00char", "bell\x07 and \x1b[0m escape", "del\x7f", "nbsp\u00a0here", "zero\u200bwidth", "soft\u00adhyphen",
        "em\u2003space", "ideographic\u3000space", "line\u2028sep", "bom\ufeffhere", "rtl\u200fmark",
        "x" * 300, "supercalifragilisticexpialidocious" * 5, "ab" * 200, "😀" * 50, "1" * 100, " " * 50 + "end",
        "-" * 80, "\n" * 30, "é" * 100,
        "https://example.com/path?query=1&x=y#frag", "user@example.org", "C:\\Program Files\\x", "~/.bashrc",
        "<html><body>Hi</body></html>", "{\"key\": [1, 2, {\"n\": null}]}", "SELECT * FROM t WHERE a = 'b';",
        "print('hello')  # comment", "x = [i**2 for i in range(10)]", "#include <stdio.h>\nint main() { return 0; }",
        "  indented\n    more\n\tTabbed\n", "a\u00a0\u00a0b", "end with newline\n", "end with spaces  ",
    ]
    prose = [
        "To be, or not to be, that is the question:", "Whether 'tis nobler in the mind to suffer",
        "The slings and arrows of outrageous fortune,", "Or to take arms against a sea of troubles",
        "And by opposing end them. To die—to sleep,", "No more; and by a sleep to say we end",
        "We hold these truths to be self-evident, that all men are created equal.",
        "In 1492, Columbus sailed the ocean blue.", "The meeting is at 10:30am on Tuesday, March 3rd.",
        "She said, \"I'll be there by 5.\"", "Price: $1,299.99 (incl. 19% VAT)", "Temperature: -40°C = -40°F",
        "E = mc²; a² + b² = c²", "The year 2000 problem (Y2K)", "Mr. Smith's dog's bone", "rock-'n'-roll",
    ]
    s += prose
    for sp in specials:
        s += [sp, f"before{sp}after", f" {sp} ", f"{sp}{sp}", f"text {sp}\nmore", f"{sp}Hello"]
    # Combinations to reach variety: each prose line in a few decorations.
    for p in prose:
        s += [p.upper(), p.lower(), "  " + p + "\n", p.replace(" ", "\t"), p.replace(" ", "  ")]
    seen, out = set(), []
    for x in s:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def qwen_tokenizer(pre=None):
    """The pipeline transformers' Qwen2Converter builds (NFC, the Qwen2 Split regex + ByteLevel without
    regex, ByteLevel decoder and post-processor), on the real vocab.json + merges.txt, with the added
    tokens of tokenizer_config.json at their real ids."""
    from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, processors
    d = os.path.join(SHARED, "qwen1.5-moe")
    bpe = models.BPE.from_file(os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt"), dropout=None,
                               unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False)
    tok = Tokenizer(bpe)
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""),
                             behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    with open(os.path.join(d, "tokenizer_config.json")) as f:
        added = json.load(f)["added_tokens_decoder"]
    for tid in sorted(added, key=int):
        a = added[tid]
        tok.add_special_tokens([AddedToken(a["content"], single_word=a["single_word"], lstrip=a["lstrip"],
                                           rstrip=a["rstrip"], normalized=a["normalized"], special=True)])
        assert tok.token_to_id(a["content"]) == int(tid), (a, tok.token_to_id(a["content"]))
    j = json.loads(tok.to_str())
    if pre is not None:
        j["pre_tokenizer"] = pre
        tok = Tokenizer.from_str(json.dumps(j))
    return tok, j


def record(name, tok, source, extra=None):
    specials = sorted({t.content for t in tok.get_added_tokens_decoder().values()})
    specials = specials[:2] + specials[-1:]
    cases = []
    for text in test_strings(specials):
        enc = tok.encode(text, add_special_tokens=False).ids
        with_special = tok.encode(text, add_special_tokens=True).ids
        dec = tok.decode(enc, skip_special_tokens=False)
        dec_skip = tok.decode(enc, skip_special_tokens=True)
        c = {"text": text, "ids": enc}
        if with_special != enc:
            c["ids_special"] = with_special
        if dec != text:
            c["decoded"] = dec
        if dec_skip != dec:
            c["decoded_skip"] = dec_skip
        cases.append(c)
    doc = {"source": source, "generated_by": "scripts/dev/make_tokenizer_fixtures.py",
           "tokenizers_version": __import__("tokenizers").__version__, "cases": cases}
    if extra:
        doc.update(extra)
    path = os.path.join(OUT, name + ".json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    print(f"{path}: {len(cases)} strings, {os.path.getsize(path)} bytes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--zipmoe", default=os.path.join(ROOT, "build", "app", "zipmoe"))
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    # The tokenizer.json pipeline minus vocab and merges: the C++ test fills those in from shared/.
    def pipeline(j):
        j = dict(j)
        j["model"] = {k: v for k, v in j["model"].items() if k not in ("vocab", "merges")}
        return j
    tok, j = qwen_tokenizer()
    record("qwen15_real", tok, "qwen1.5-moe vocab.json+merges.txt via transformers Qwen2TokenizerFast",
           {"pipeline": pipeline(j)})
    tok, j = qwen_tokenizer(DEEPSEEK_STYLE_PRE)
    record("qwen15_deepseek_split", tok, "qwen1.5-moe vocab with a DeepSeek-style Sequence of Splits",
           {"pipeline": pipeline(j)})
    record("switch_real", Tokenizer.from_file(os.path.join(SHARED, "switch-large-128", "tokenizer.json")),
           "switch-large-128 tokenizer.json")
    with tempfile.TemporaryDirectory() as tmp:
        for family in ["mixtral", "qwen2_moe", "deepseek_v2", "olmoe", "switch_transformers"]:
            d = os.path.join(tmp, family)
            subprocess.run([args.zipmoe, "make-model", "--family", family, "--preset", "tiny", d], check=True,
                           stdout=subprocess.DEVNULL)
            record("generated_" + family, Tokenizer.from_file(os.path.join(d, "tokenizer.json")),
                   f"zipmoe make-model --family {family} --preset tiny", {"family": family})


if __name__ == "__main__":
    main()
