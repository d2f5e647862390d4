"""The BERT encoder of all-MiniLM-L6-v2 in NumPy: embeddings, six transformer layers, mean
pooling and L2 normalisation, as sentence-transformers computes them (float32, exact GELU).

Pure functions over the published weights (a safetensors file read into arrays): no torch, no
transformers. `encode` takes token ids and their attention mask, padded to one length.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

HIDDEN = 384
HEADS = 12
LAYERS = 6
LAYER_NORM_EPS = 1e-12
MAX_POSITIONS = 512

# erf to within 1.5e-7 (Abramowitz and Stegun 7.1.26): below float32's own rounding here
_ERF_P = 0.3275911
_ERF_A = (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)


@dataclass(frozen=True)
class Layer:
    """One transformer layer; matrices stored transposed (x @ w), query/key/value fused."""

    qkv_w: np.ndarray
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    ln1_g: np.ndarray
    ln1_b: np.ndarray
    up_w: np.ndarray
    up_b: np.ndarray
    down_w: np.ndarray
    down_b: np.ndarray
    ln2_g: np.ndarray
    ln2_b: np.ndarray


@dataclass(frozen=True)
class Weights:
    words: np.ndarray
    positions: np.ndarray
    token_type: np.ndarray
    ln_g: np.ndarray
    ln_b: np.ndarray
    layers: tuple[Layer, ...]


def load_weights(tensors: Mapping[str, np.ndarray]) -> Weights:
    """The arrays `encode` needs, from a BERT checkpoint's named tensors."""

    def get(name: str) -> np.ndarray:
        return np.ascontiguousarray(tensors[name], dtype=np.float32)

    def layer(i: int) -> Layer:
        p = f"encoder.layer.{i}."
        qkv = [f"{p}attention.self.{part}" for part in ("query", "key", "value")]
        return Layer(
            qkv_w=np.ascontiguousarray(np.concatenate([get(f"{n}.weight") for n in qkv]).T),
            qkv_b=np.concatenate([get(f"{n}.bias") for n in qkv]),
            out_w=np.ascontiguousarray(get(f"{p}attention.output.dense.weight").T),
            out_b=get(f"{p}attention.output.dense.bias"),
            ln1_g=get(f"{p}attention.output.LayerNorm.weight"),
            ln1_b=get(f"{p}attention.output.LayerNorm.bias"),
            up_w=np.ascontiguousarray(get(f"{p}intermediate.dense.weight").T),
            up_b=get(f"{p}intermediate.dense.bias"),
            down_w=np.ascontiguousarray(get(f"{p}output.dense.weight").T),
            down_b=get(f"{p}output.dense.bias"),
            ln2_g=get(f"{p}output.LayerNorm.weight"),
            ln2_b=get(f"{p}output.LayerNorm.bias"),
        )

    return Weights(
        words=get("embeddings.word_embeddings.weight"),
        positions=get("embeddings.position_embeddings.weight"),
        token_type=get("embeddings.token_type_embeddings.weight"),
        ln_g=get("embeddings.LayerNorm.weight"),
        ln_b=get("embeddings.LayerNorm.bias"),
        layers=tuple(layer(i) for i in range(LAYERS)),
    )


def encode(weights: Weights, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Unit vectors (batch, HIDDEN) for token ids (batch, tokens) and their 0/1 attention mask:
    the mean of the last layer's token states over the mask, L2-normalised."""
    tokens = ids.shape[1]
    x = weights.words[ids] + weights.positions[:tokens] + weights.token_type[0]
    x = _layer_norm(x, weights.ln_g, weights.ln_b)
    bias = ((1.0 - mask.astype(np.float32)) * np.finfo(np.float32).min)[:, None, None, :]
    for layer in weights.layers:
        x = _layer(x, layer, bias)
    m = mask.astype(np.float32)[:, :, None]
    pooled = (x * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
    norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
    result: np.ndarray = pooled / norms
    return result


def _layer(x: np.ndarray, layer: Layer, bias: np.ndarray) -> np.ndarray:
    batch, tokens, _ = x.shape
    head = HIDDEN // HEADS
    qkv = _dense(x, layer.qkv_w, layer.qkv_b).reshape(batch, tokens, 3, HEADS, head).transpose(2, 0, 3, 1, 4)
    q, k, v = qkv[0], qkv[1], qkv[2]
    scores = (q @ k.transpose(0, 1, 3, 2)) * np.float32(1.0 / np.sqrt(head)) + bias
    scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
    scores /= scores.sum(axis=-1, keepdims=True)
    context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, tokens, HIDDEN)
    x = _layer_norm(_dense(context, layer.out_w, layer.out_b) + x, layer.ln1_g, layer.ln1_b)
    hidden = _gelu(_dense(x, layer.up_w, layer.up_b))
    return _layer_norm(_dense(hidden, layer.down_w, layer.down_b) + x, layer.ln2_g, layer.ln2_b)


def _dense(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """`x @ weight + bias` over the last axis, as one matrix product of every token at once:
    NumPy multiplies a stack of matrices one by one, several times slower for a batch."""
    flat = x.reshape(-1, x.shape[-1]) @ weight + bias
    result: np.ndarray = flat.reshape(*x.shape[:-1], weight.shape[1])
    return result


def _layer_norm(x: np.ndarray, gain: np.ndarray, shift: np.ndarray) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    var = (centred * centred).mean(axis=-1, keepdims=True)
    result: np.ndarray = centred / np.sqrt(var + np.float32(LAYER_NORM_EPS)) * gain + shift
    return result


def erf(x: np.ndarray) -> np.ndarray:
    """The error function, elementwise: within 1.5e-7, plus float32 rounding (5e-7 in all)."""
    a = np.abs(x)
    t = np.float32(_ERF_P) * a
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    poly: np.ndarray = np.full_like(t, np.float32(_ERF_A[0]))
    for coefficient in _ERF_A[1:]:  # Horner's rule, in place: a large batch makes no temporaries
        poly *= t
        poly += np.float32(coefficient)
    poly *= t
    np.multiply(a, a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a
    np.subtract(np.float32(1.0), poly, out=poly)
    poly *= np.sign(x)
    return poly


def _gelu(x: np.ndarray) -> np.ndarray:
    """GELU as BERT's `gelu` (the exact one, through erf), not the tanh approximation."""
    result: np.ndarray = 0.5 * x * (1.0 + erf(x * np.float32(1.0 / np.sqrt(2.0))))
    return result
