"""Writing your own adapter: a TorchModel subclass needs only forward(); an ONNX Runtime
session goes through it and explains as the torch model it was exported from."""

import numpy as np
import pytest
import slalom_core as sc
import torch
from invariance import assert_same_answer


class Bag(torch.nn.Module):
    """Mean of token embeddings, then a linear layer: exports to ONNX with no surprises."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(40, 8)
        self.emb.weight.data *= 3.0  # outputs that vary by about a log-odds across ids
        self.out = torch.nn.Linear(8, 2)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        m = mask.unsqueeze(-1).to(self.emb.weight.dtype)
        return self.out((self.emb(ids) * m).sum(1) / m.sum(1).clamp_min(1.0))


class MyAdapter(sc.TorchModel):
    """The documented minimum: forward on padded rows."""

    def __init__(self, net: torch.nn.Module) -> None:
        super().__init__(prefix_ids=[1], suffix_ids=[2], pad_id=0, module=net)
        self.net = net

    def forward(self, input_ids, attention_mask):
        return self.net(input_ids, attention_mask)


def test_a_subclass_with_only_forward_explains_like_torch_classifier():
    net = Bag()
    mine = sc.explain(MyAdapter(net), [5, 9, 11, 7, 30], n_samples=300, seed=0)
    theirs = sc.explain(
        sc.TorchClassifier(net, prefix_ids=[1], suffix_ids=[2]), [5, 9, 11, 7, 30], n_samples=300, seed=0
    )
    np.testing.assert_array_equal(mine.contribution, theirs.contribution)


def test_the_subclass_restores_the_model_mode():
    net = Bag().train()
    sc.explain(MyAdapter(net), [5, 9, 11], n_samples=100, seed=0)
    assert net.training


@pytest.mark.invariance
def test_an_onnx_session_explains_as_its_torch_model(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    net = Bag().eval()
    ids, mask = torch.tensor([[1, 5, 6, 7, 2]]), torch.ones(1, 5, dtype=torch.long)
    path = tmp_path / "bag.onnx"
    axes = {"input_ids": {0: "b", 1: "t"}, "attention_mask": {0: "b", 1: "t"}, "logits": {0: "b"}}
    torch.onnx.export(
        net, (ids, mask), str(path), input_names=["input_ids", "attention_mask"], output_names=["logits"],
        dynamic_axes=axes, dynamo=False,
    )  # fmt: skip
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    onnx = sc.OnnxClassifier(session, prefix_ids=[1], suffix_ids=[2], pad_id=0)
    torch_clf = sc.TorchClassifier(net, prefix_ids=[1], suffix_ids=[2], pad_id=0)
    seqs = [[5, 9, 11], [7], [30, 31, 32, 33, 34]]  # padded in one batch
    # tol: float32: ONNX Runtime and torch compute the same float32 network with other kernels
    np.testing.assert_allclose(onnx.score(seqs).numpy(), torch_clf.score(seqs).numpy(), atol=1e-5)
    a = sc.explain(onnx, [5, 9, 11, 7, 30], n_samples=300, seed=0)
    b = sc.explain(torch_clf, [5, 9, 11, 7, 30], n_samples=300, seed=0)
    # float32 runtimes differ in the last bits; every score follows within a tenth of its
    # standard error (what the data determine, tests/invariance.py), the ranking exactly
    assert_same_answer(a, b)
    assert np.argsort(-np.abs(a.contribution)).tolist() == np.argsort(-np.abs(b.contribution)).tolist()


def test_onnx_classifier_refuses_a_session_without_the_inputs():
    class Session:
        def get_inputs(self):
            return [type("I", (), {"name": "ids"})()]

        def run(self, names, feeds):
            return [np.zeros((1, 2))]

    with pytest.raises(ValueError, match="no input"):
        sc.OnnxClassifier(Session())
    with pytest.raises(TypeError, match="InferenceSession"):
        sc.OnnxClassifier(object())
