"""Model adapters on tiny random HF models: the engine's logits equal the model's own."""

import numpy as np
import pytest
import slalom_core as sc
import torch
from tiny_models import bert_tokenizer, gpt2_tokenizer, roberta_tokenizer, tiny_classifier

TOKENIZERS = {
    "bert": bert_tokenizer,
    "distilbert": bert_tokenizer,
    "roberta": roberta_tokenizer,
    "gpt2": gpt2_tokenizer,
}
TEXTS = ["the movie was great", "i hated the boring plot and the actor", "a very good film"]


@pytest.fixture(params=list(TOKENIZERS))
def family(request, tok_dir):
    tok = TOKENIZERS[request.param](tok_dir / request.param)
    return request.param, tok, tiny_classifier(request.param, tok, num_labels=3)


def test_engine_logits_equal_model_logits(family):
    kind, tok, model = family
    adapter = sc.HFClassifier(model, tok)
    seqs = [tok(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    got = adapter.score(seqs)  # a padded batch of different lengths
    for text, row in zip(TEXTS, got):
        enc = tok(text, return_tensors="pt")
        with torch.no_grad():
            want = model(**enc).logits[0].double()
        # tol: float32 logits: the adapter pads and batches the texts, this reads each alone
        torch.testing.assert_close(row, want, atol=1e-5, rtol=1e-5)
        # the public raw call (used by the gradient baselines) is the same model call
        with adapter.session():
            raw = adapter.forward(enc["input_ids"], enc["attention_mask"]).logits[0].double()
        # tol: float32 logits, as above: the same model call through the adapter's session
        torch.testing.assert_close(raw, want, atol=1e-5, rtol=1e-5)


def test_special_tokens_read_from_tokenizer(tok_dir):
    bert = bert_tokenizer(tok_dir / "b")
    assert sc.HFClassifier(tiny_classifier("bert", bert), bert).prefix_ids == (bert.cls_token_id,)
    rob = roberta_tokenizer(tok_dir / "r")
    a = sc.HFClassifier(tiny_classifier("roberta", rob), rob)
    assert (a.prefix_ids, a.suffix_ids) == ((rob.bos_token_id,), (rob.eos_token_id,))
    gpt = gpt2_tokenizer(tok_dir / "g")
    g = sc.HFClassifier(tiny_classifier("gpt2", gpt), gpt)
    assert (g.prefix_ids, g.suffix_ids) == ((), ())
    assert g.equal_length_batches  # no pad token: batches never pad


def test_gpt2_without_pad_token_explained(tok_dir):
    tok = gpt2_tokenizer(tok_dir / "g2")
    assert tok.pad_token_id is None
    model = tiny_classifier("gpt2", tok, num_labels=2)
    exp = sc.explain(model, "i hated the boring plot", tokenizer=tok, method="fidel", n_samples=60, seed=0)
    assert np.isfinite(exp.lin).all()
    assert model.config.pad_token_id is None  # the temporary pad id is gone again
    with torch.no_grad():
        logits = model(**tok("i hated the boring plot", return_tensors="pt")).logits[0]
    # tol: float32 logits of the same text, read alone and by the adapter
    assert exp.model_output == pytest.approx(float(logits[1] - logits[0]), abs=1e-5)


def test_model_left_unchanged(tok_dir):
    tok = bert_tokenizer(tok_dir / "u")
    model = tiny_classifier("bert", tok).train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    flags = [p.requires_grad for p in model.parameters()]
    exp = sc.explain(model, "the movie was great", tokenizer=tok, n_samples=40, seed=0)
    assert model.training  # restored
    assert [p.requires_grad for p in model.parameters()] == flags
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert next(model.parameters()).dtype == torch.float32
    # explained in eval mode: dropout off, so repeated runs agree
    again = sc.explain(model, "the movie was great", tokenizer=tok, n_samples=40, seed=0)
    np.testing.assert_array_equal(exp.lin, again.lin)


def test_word_granularity_groups_subtokens(tok_dir):
    tok = bert_tokenizer(tok_dir / "w")
    model = tiny_classifier("bert", tok)
    exp = sc.explain(model, "the actors loved it", tokenizer=tok, granularity="word", n_samples=40, seed=0)
    assert exp.tokens == ["the", "actors", "loved", "it"]
    assert len(exp.token_ids[1]) == 2  # actor + ##s
    assert exp.value.shape == (4,)


def test_torch_and_string_classifiers():
    f = lambda ids, mask: ((ids == 3).float() * mask).sum(1, keepdim=True)
    clf = sc.TorchClassifier(f, prefix_ids=[9], suffix_ids=[8], pad_id=0)
    assert clf.score([[3, 3, 1], [2]]).squeeze(1).tolist() == [2.0, 0.0]
    s = sc.StringClassifier(lambda texts: [[t.count("good")] for t in texts])
    exp = sc.explain(s, "good good bad", method="ana")
    assert exp.tokens == ["good", "good", "bad"]
    assert exp.value.tolist() == [1.0, 1.0, 0.0]
    # A reversed numpy view (negative strides) is an answer like any other.
    assert sc.score_matrix(np.array([[0.0, 1.0], [2.0, 3.0]])[:, ::-1], 2).tolist() == [[1.0, 0.0], [3.0, 2.0]]


def test_a_segmentation_with_its_text_shows_a_string_model_the_original_substrings(tok_dir):
    # An uncased tokenizer's ids decode to "great movie"; given the text it was cut from, a
    # case-sensitive model on strings sees "Great movie" and its own substrings instead.
    tok = bert_tokenizer(tok_dir / "s")
    seen: list[str] = []

    def f(texts):
        seen.extend(texts)
        return [[0.0, 1.0 if "Great" in t else -1.0] for t in texts]

    ids = tok("Great movie", add_special_tokens=False)["input_ids"]
    for text, expected in ((None, -1.0), ("Great movie", 1.0)):
        seen.clear()
        seg = sc.Segmentation([(i,) for i in ids], ["Great", "movie"], text=text)
        exp = sc.explain(sc.StringClassifier(f, tok), seg, method="ana", output="logits")
        assert exp.model_output == pytest.approx(expected)
        assert ("Great movie" in seen) == (text is not None) and ("Great" in seen) == (text is not None)


def _case_sensitive(seen: list[str]):
    """f(list[str]): [0, +1] when "Great" (capitalised) is in the text, else [0, -1]."""

    def f(texts):
        seen.extend(texts)
        return [[0.0, 1.0 if "Great" in t else -1.0] for t in texts]

    return f


def _is_subsequence(sample: str, text: str) -> bool:
    """True if the words of ``sample`` are words of ``text`` in their order, case kept."""
    words = iter(text.split())
    return all(any(w == x for x in words) for w in sample.split())


def _is_cut_from(sample: str, text: str) -> bool:
    """True if ``sample`` is ``text`` with characters left out (spaces aside), case kept."""
    chars = iter(text.replace(" ", ""))
    return all(any(c == x for x in chars) for c in sample.replace(" ", ""))


@pytest.mark.filterwarnings("ignore::slalom_core.SlalomFitWarning")  # f is no SLALOM: only what it saw counts
@pytest.mark.parametrize("granularity", ["token", "word"])
def test_texts_that_differ_in_case_never_share_what_a_string_model_sees(tok_dir, granularity):
    # An uncased tokenizer gives both texts the same ids; a case-sensitive model must still
    # see each text's own words, whether the texts share a call or an adapter.
    tok = bert_tokenizer(tok_dir / "case")
    seen: list[str] = []
    f = _case_sensitive(seen)
    texts = ["Great movies", "great movies"]  # movie + ##s: a word of two tokens
    truth = [row[1] for row in f(texts)]
    options = dict(method="ana", output="logits", granularity=granularity)
    seen.clear()
    batch = sc.explain_batch(sc.StringClassifier(f, tok), texts, **options)
    assert [e.model_output for e in batch] == pytest.approx(truth)
    assert all(_is_cut_from(t, texts[0]) or _is_cut_from(t, texts[1]) for t in seen)
    shared = sc.StringClassifier(f, tok)
    for order in (texts, texts[::-1]):
        for text in order:
            seen.clear()
            alone = sc.explain(sc.StringClassifier(f, tok), text, **options)
            assert alone.model_output == pytest.approx(f([text])[0][1])
            assert all(_is_cut_from(t, text) for t in seen), (text, seen)
            seen.clear()
            again = sc.explain(shared, text, **options)  # after the other text, same adapter
            assert all(_is_cut_from(t, text) for t in seen), (text, seen)
            assert again.model_output == pytest.approx(alone.model_output)
            np.testing.assert_allclose(again.value, alone.value)
            np.testing.assert_allclose(batch[texts.index(text)].value, alone.value)
    # The explanation's ids are still the tokenizer's own.
    ids = tok(texts[0], add_special_tokens=False)["input_ids"]
    want = [(i,) for i in ids] if granularity == "token" else [tuple(ids[:1]), tuple(ids[1:])]
    assert batch[0].token_ids == batch[1].token_ids == want


@pytest.mark.filterwarnings("ignore::slalom_core.SlalomFitWarning")  # f is no SLALOM: only what it saw counts
def test_a_string_model_sees_each_occurrence_in_its_own_case(tok_dir):
    # "Good" and "good" are one id to an uncased tokenizer; a sample keeping only the
    # lower-case one must not show the model "Good".
    tok = bert_tokenizer(tok_dir / "occ")
    seen: list[str] = []

    def f(texts):
        seen.extend(texts)
        return [[0.0, float(t.split().count("Good"))] for t in texts]

    text = "Good movie good"
    exp = sc.explain(sc.StringClassifier(f, tok), text, method="ana", output="logits")
    assert seen and all(_is_subsequence(t, text) for t in seen), seen
    assert exp.model_output == pytest.approx(1.0)
    good, lower = exp.value[0], exp.value[2]  # only the capitalised word moves f
    # tol: float64 rounding: a string black box that ignores the word gives exactly 0 through ana
    assert good > 0.5 and abs(lower) < 1e-6


@pytest.mark.filterwarnings("ignore::slalom_core.SlalomFitWarning")  # f is no SLALOM: only what it saw counts
def test_texts_that_differ_in_whitespace_get_their_own_output(tok_dir):
    # Same tokens, same pieces: only the full text tells them apart, and f sees it exactly.
    tok = bert_tokenizer(tok_dir / "ws")
    texts = ["great movie", "great  movie\n", " great movie"]
    f = lambda ts: [[0.0, float(len(t))] for t in ts]
    batch = sc.explain_batch(sc.StringClassifier(f, tok), texts, method="ana", output="logits")
    assert [e.model_output for e in batch] == pytest.approx([float(len(t)) for t in texts])


@pytest.mark.filterwarnings("ignore::slalom_core.SlalomFitWarning")  # f is no SLALOM: only what it saw counts
def test_a_string_adapter_forgets_the_texts_it_no_longer_needs(tok_dir):
    import gc

    tok = bert_tokenizer(tok_dir / "mem")
    clf = sc.StringClassifier(lambda ts: [[0.0, float(len(t))] for t in ts], tok)
    for n in range(1, 50):
        sc.explain(clf, "great movie" + " " * n + "!", method="ana", output="logits")
    gc.collect()
    assert len(clf._vocab.texts) == 0  # no text is kept once its explanation is done
    assert len(clf._vocab.pieces) <= 3  # great, movie, ! (each in one surface form)


def _length_model(texts):  # module level, so that it pickles
    return [[0.0, float(len(t))] for t in texts]


def test_a_string_adapter_pickles_and_explains_after(tok_dir):
    # Ray ships the adapter to its workers by pickling it (a corpus run with engine="ray").
    import pickle

    tok = bert_tokenizer(tok_dir / "pickle")
    clf = sc.StringClassifier(_length_model, tok)
    seg = clf.segment("Great  movie")  # a text with an id of its own, alive while seg is
    copy = pickle.loads(pickle.dumps(clf))
    for text in ("Great  movie", "great movie\n"):
        exp = sc.explain(copy, text, method="ana", output="logits")
        assert exp.model_output == pytest.approx(len(text))
    assert clf.decode([i for u in seg.unit_ids for i in u]) == "Great  movie"


def test_byte_level_pieces_show_a_character_once(tok_dir):
    # GPT-2 cuts an emoji into several byte tokens whose offsets all cover the character:
    # a sample keeping them must show it once, not once per byte.
    tok = gpt2_tokenizer(tok_dir / "bytes")
    clf = sc.StringClassifier(_length_model, tok)
    seg = clf.segment("a 😀 film")
    assert len(seg.unit_ids) > 3
    assert clf.decode([i for u in seg.unit_ids[1:] for i in u]) == " 😀 film"


def test_pipeline_accepted(tok_dir):
    from transformers import pipeline

    tok = bert_tokenizer(tok_dir / "p")
    pipe = pipeline("text-classification", model=tiny_classifier("bert", tok), tokenizer=tok)
    exp = sc.explain(pipe, "a very good film", n_samples=30, seed=1)
    assert len(exp.tokens) == 4
    assert sc.models.is_pipeline(pipe)

    class Wrapper:  # a user's function that holds a model: not a pipeline to look inside
        model, tokenizer = pipe.model, tok

        def __call__(self, texts):
            return [[0.0, 1.0] for _ in texts]

    assert not sc.models.is_pipeline(Wrapper())


def test_probabilities_converted_to_logits():
    logits = torch.tensor([[0.3, -1.2], [2.0, 0.5]], dtype=torch.float64)
    link_logits = sc.OutputLink(2).transform(logits)
    link_probs = sc.OutputLink(2, output="probs").transform(torch.softmax(logits, 1))
    torch.testing.assert_close(link_logits, link_probs)
    three = torch.tensor([[0.1, 0.7, 0.2]], dtype=torch.float64)
    one_vs_rest = sc.OutputLink(3, output="probs", target=1, multiclass="ovr").transform(three)
    assert one_vs_rest.item() == pytest.approx(np.log(0.7 / 0.3))


def test_batches_do_not_pad_short_samples_to_a_long_one():
    clf = sc.TorchClassifier(lambda ids, mask: ids.float().sum(1, keepdim=True), batch_size=64)
    seqs = [[1, 2]] * 40 + [list(range(1, 200))] + [[3, 4, 5]] * 10
    batches = clf._batches(seqs)
    long_batch = next(b for b in batches if 40 in b)
    assert long_batch == [40]  # the full-length sequence is batched alone
    assert sorted(i for b in batches for i in b) == list(range(len(seqs)))
    # padding still gives each row its own result
    out = clf.score(seqs).squeeze(1)
    assert out[40].item() == sum(range(1, 200)) and out[0].item() == 3 and out[-1].item() == 12


def test_score_matrix_reads_every_output_form():
    from types import SimpleNamespace

    logits = torch.tensor([[1.0, -2.0], [0.5, 3.0]])
    for out in (
        logits,
        SimpleNamespace(logits=logits),
        {"logits": logits},
        (logits, "hidden"),
        [logits],
        logits.numpy(),
    ):
        torch.testing.assert_close(sc.score_matrix(out, 2), logits)
    # One score per input is a column; a plain list of numbers is that too, not "element 0".
    assert sc.score_matrix(torch.tensor([1.0, 2.0]), 2).tolist() == [[1.0], [2.0]]
    assert sc.score_matrix([1.0, 2.0], 2).tolist() == [[1.0], [2.0]]
    assert sc.score_matrix(torch.tensor(4.0), 1).tolist() == [[4.0]]
    # A batch of one squeezed to (K,) is that row; integer scores become float64.
    assert sc.score_matrix(torch.tensor([1, 2, 3]), 1).dtype == torch.float64
    assert sc.score_matrix(torch.tensor([1, 2, 3]), 1).shape == (1, 3)
    # index= selects the dimensions between the batch and the classes.
    heads = torch.stack([torch.zeros_like(logits), logits], dim=1)
    torch.testing.assert_close(sc.score_matrix(heads, 2, index=(1,)), logits)


def test_score_matrix_keeps_the_graph_and_rejects_bad_outputs():
    x = torch.ones(2, 3, requires_grad=True)
    out = sc.score_matrix(x * 2.0, 2)
    out.sum().backward()
    assert x.grad is not None and float(x.grad.sum()) == 12.0
    with pytest.raises(ValueError, match="3 rows of scores for 2 inputs"):
        sc.score_matrix(torch.zeros(3, 2), 2)
    with pytest.raises(ValueError, match="one row per input"):
        sc.score_matrix(torch.tensor(1.0), 2)
    with pytest.raises(ValueError, match=r"\(batch, classes\)"):
        sc.score_matrix(torch.zeros(2, 2, 2), 2)
    with pytest.raises(ValueError, match="dimensions"):
        sc.score_matrix(torch.zeros(2, 2), 2, index=(0,))
    with pytest.raises(FloatingPointError, match=r"non-finite.*1 of 2 inputs.*\[1\]"):
        sc.score_matrix(torch.tensor([[0.0, 1.0], [float("nan"), 1.0]]), 2)
    with pytest.raises(FloatingPointError, match="non-finite"):
        sc.score_matrix(torch.tensor([float("inf")]), 1)
    with pytest.raises(TypeError, match="complex"):
        sc.score_matrix(torch.zeros(2, 2, dtype=torch.complex64), 2)
    with pytest.raises(ValueError, match="n_rows"):
        sc.score_matrix(torch.zeros(2, 2), -1)


def test_the_default_word_tokenizer_keeps_each_texts_own_whitespace():
    # StringClassifier(f) splits on whitespace: "a  b" and "a b" have the same ids, but the
    # model must see each text as it was given.
    clf = sc.StringClassifier(_length_model)
    texts = ["Great film", "Great  film", " Great film\n"]
    exps = sc.explain_batch(clf, texts, method="ana", output="logits")
    assert [e.model_output for e in exps] == [float(len(t)) for t in texts]
    assert all(e.tokens == ["Great", "film"] for e in exps)
