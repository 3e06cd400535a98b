#!/usr/bin/env python3
"""The tokenizers' reference (docs/text.md, "Tests"), run in build/text-venv (PyPI tokenizers and
sentencepiece, pinned in tests/text/requirements.txt).

  check_tokenizers.py prepare DIR   writes DIR/corpus.txt (over 1 MB: Debian's fortunes, text in
                                    many scripts, emoji, whitespace runs, special tokens), trains
                                    byte-level BPE tokenizers (GPT-2's ByteLevel regex; Llama 3's
                                    Split regex + ByteLevel; ByteLevel with a prefix space) and
                                    SentencePiece models (BPE, unigram) on it, and writes their ids
                                    of the corpus and tokenizers' one-thread encoding time
  check_tokenizers.py spm DIR       loads the SentencePiece model Loom trained (DIR/loom_spm.model)
                                    and checks that sentencepiece's ids of the corpus equal Loom's
                                    (DIR/loom_spm.ids)

Ids are written as little-endian int32 files, each document's ids (BPE: 50 lines of the corpus;
SentencePiece: one line) followed by -1.
"""
import glob
import json
import os
import random
import struct
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def documents(text, lines=50):
    """The corpus as documents of 50 lines (each keeping its line ends), encoded one by one: a
    tokenizer's ordinary input, and a batch that tokenizers encodes at its usual speed (one 1 MB
    string is far slower in it). Only '\n' ends a line here (not str.splitlines' other breaks)."""
    parts = text.split("\n")
    docs = []
    for i in range(0, len(parts), lines):
        d = "\n".join(parts[i:i + lines])
        if i + lines < len(parts):
            d += "\n"
        if d:
            docs.append(d)
    return docs


def write_ids(path, ids):
    with open(path, "wb") as f:
        f.write(struct.pack("<%di" % len(ids), *ids))


def read_ids(path):
    with open(path, "rb") as f:
        b = f.read()
    return list(struct.unpack("<%di" % (len(b) // 4), b))


def corpus_text():
    files = sorted(f for f in glob.glob("/usr/share/games/fortunes/*") if not f.endswith((".dat", ".u8")))
    if not files:
        sys.exit("no fortunes in /usr/share/games/fortunes: install Debian's fortunes (scripts/setup.sh)")
    parts = []
    for f in files:
        with open(f, "rb") as fh:
            parts.append(fh.read().decode("utf-8", errors="replace"))
    fortunes = "".join(parts)[:1_000_000]
    rng = random.Random(47)
    scripts = [
        "Größe Übermaß straße naïve café déjà vu façade ",
        "Привет, как дела? Съешь же ещё этих мягких французских булок. ",
        "Γειά σου Κόσμε· ξεσκεπάζω την ψυχοφθόρα βδελυγμία. ",
        "日本語のテキストと漢字、ひらがな、カタカナ。東京は2024年に ",
        "中文文本：我能吞下玻璃而不伤身体。一二三四五六七八九十 ",
        "한국어 텍스트: 다람쥐 헌 쳇바퀴에 타고파 ",
        "العربية: نص حكيم له سر قاطع وذو شأن عظيم ",
        "עברית: דג סקרן שט בים מאוכזב ",
        "हिन्दी: ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण ",
        "ไทย: เป็นมนุษย์สุดประเสริฐเลิศคุณค่า ",
        "Tiếng Việt: Tôi có thể ăn thủy tinh mà không hại gì ",
        "emoji: 😀😃😄 👍🏽 👩‍👩‍👧‍👦 🇫🇷🇯🇵 🏳️‍🌈 ❤️ 🧑🏿‍💻 ",
        "combining: e\u0301 a\u0308 n\u0303 Z\u0351\u0352\u0353 ",
        "numbers: 3.14159 1,000,000 12345678901234567890 ٣٤٥ ४५६ ",
        "punct: !!! ??? ... --- ''' \"\"\" ((( ))) {{{ }}} <<<>>> @#$%^&*() ",
        "contractions: I'm you're he's we've they'll she'd IT'S WE'RE Don'T ",
        "<|endoftext|>", "<|begin_of_text|>", "<|end_of_text|>",
    ]
    spaces = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2028", "\u0085",
              "\u200b", "\u2003\u2003", "\x0b", "\x0c"]
    extra = []
    size = 0
    while size < 300_000:
        k = rng.random()
        if k < 0.55:
            s = rng.choice(scripts)
        elif k < 0.85:
            s = rng.choice(spaces) * rng.randint(1, 12)
        elif k < 0.95:
            s = rng.choice(fortunes.split("\n%\n")[:2000])
        else:  # long runs: one piece of hundreds of characters (the merge loop's long path)
            s = rng.choice(["a", "ab", " ", "7", "é", "😀", "-", "\n"]) * rng.randint(100, 2000)
        extra.append(s)
        size += len(s.encode("utf-8"))
    return fortunes + "".join(extra)


def train_bpe(corpus_path, out_dir, ntokens):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    made = {}
    # GPT-2's kind: ByteLevel with its own regex, <|endoftext|>
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=ntokens, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train([corpus_path], trainer)
    made["gpt2"] = tok
    # the same vocabulary with a prefix space
    tok2 = Tokenizer.from_str(tok.to_str())
    tok2.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    made["gpt2_prefix"] = tok2
    # Llama 3's kind: its Split regex, ByteLevel without a regex, ignore_merges, a BOS template
    tok3 = Tokenizer(models.BPE(ignore_merges=True))
    tok3.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok3.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=ntokens, special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok3.train([corpus_path], trainer)
    bos = tok3.token_to_id("<|begin_of_text|>")
    tok3.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])])
    made["llama3"] = tok3
    timing = {}
    with open(corpus_path, encoding="utf-8", newline="") as f:
        docs = documents(f.read())
    nbytes = sum(len(d.encode("utf-8")) for d in docs)
    for name, t in made.items():
        t.save(os.path.join(out_dir, name + ".json"))
        encodings = t.encode_batch(docs)
        ids = []
        for e in encodings:
            ids.extend(e.ids)
            ids.append(-1)
        write_ids(os.path.join(out_dir, name + ".ids"), ids)
        # CPU time of the process (one thread: RAYON_NUM_THREADS=1), the best of 3: on a shared
        # machine the wall time measures the neighbours too
        best = float("inf")
        for _ in range(3):
            t0 = time.process_time()
            t.encode_batch(docs)
            best = min(best, time.process_time() - t0)
        timing[name] = best
        skip = 1 if name == "llama3" else 0  # <|begin_of_text|> is not in the text
        if name != "gpt2_prefix":  # nor is the prefix space
            for d, e in zip(docs[:200], encodings):
                assert t.decode(e.ids[skip:], skip_special_tokens=False) == d, name + ": tokenizers' own round trip failed"
        print(f"{name}: {len(ids) - len(docs)} ids, tokenizers encodes {nbytes / best / 1e6:.2f} MB/s on one thread")
    with open(os.path.join(out_dir, "timing.json"), "w") as f:
        json.dump(timing, f)


def spm_ids(sp, lines):
    out = []
    for line in lines:
        out.extend(sp.encode(line))
        out.append(-1)
    return out


def corpus_lines(out_dir):
    with open(os.path.join(out_dir, "corpus.txt"), encoding="utf-8", newline="") as f:  # "\r\n" kept
        return f.read().split("\n")


def not_utf8_strings(lines, n=2000):
    """n byte strings that are not UTF-8 (seeded): pieces of corpus lines with stray bytes, cut
    sequences, overlong forms and surrogates put in; written length-prefixed to not_utf8.bin."""
    rng = random.Random(7)
    bad = [b"\xff", b"\xfe", b"\x80", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x99", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]
    out = []
    for _ in range(n):
        text = rng.choice(lines).encode("utf-8")[:rng.randint(0, 60)]
        for _ in range(rng.randint(1, 3)):
            at = rng.randint(0, len(text))
            text = text[:at] + rng.choice(bad + [bytes([rng.randint(0x80, 0xff)])]) + text[at:]
        out.append(text)
    return out


def train_spm(corpus_path, out_dir):
    import sentencepiece as spm

    lines = corpus_lines(out_dir)
    strings = not_utf8_strings([l for l in lines if l])
    with open(os.path.join(out_dir, "not_utf8.bin"), "wb") as f:
        for b in strings:
            f.write(struct.pack("<i", len(b)) + b)
    for kind, size in (("bpe", 2000), ("unigram", 2000)):
        prefix = os.path.join(out_dir, "py_" + kind)
        spm.SentencePieceTrainer.train(input=corpus_path, model_prefix=prefix, vocab_size=size, model_type=kind,
                                       num_threads=1, minloglevel=2, input_sentence_size=0, shuffle_input_sentence=False,
                                       max_sentence_length=8192, byte_fallback=True)
        sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
        write_ids(prefix + ".ids", spm_ids(sp, lines))
        # sentencepiece's own rule for bytes that are not UTF-8 (each one U+FFFD), its bytes API
        write_ids(prefix + ".not_utf8.ids", spm_ids(sp, strings))
        print(f"sentencepiece {kind}: {sp.get_piece_size()} pieces")


def check_loom_spm(out_dir):
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=os.path.join(out_dir, "loom_spm.model"))
    want = spm_ids(sp, corpus_lines(out_dir))
    got = read_ids(os.path.join(out_dir, "loom_spm.ids"))
    if want != got:
        n = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
        sys.exit(f"the model Loom trained: sentencepiece's ids differ from Loom's at {n} "
                 f"(sentencepiece {want[n:n + 8]}, Loom {got[n:n + 8]}; {len(want)} vs {len(got)} ids)")
    print(f"the model Loom trained ({sp.get_piece_size()} pieces) loads in sentencepiece; "
          f"its {len(want)} ids of the corpus equal Loom's")


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("prepare", "spm"):
        sys.exit(__doc__)
    out_dir = sys.argv[2]
    if sys.argv[1] == "spm":
        return check_loom_spm(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    text = corpus_text()
    corpus_path = os.path.join(out_dir, "corpus.txt")
    with open(corpus_path, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    print(f"corpus: {len(text.encode('utf-8'))} bytes, {len(text)} characters")
    train_bpe(corpus_path, out_dir, 8000)
    train_spm(corpus_path, out_dir)


if __name__ == "__main__":
    main()
