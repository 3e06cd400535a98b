#include "loom/zoo/architectures.h"

#include <algorithm>
#include <unordered_set>

#include "loom/graph/graph.h"
#include "loom/nn/attention.h"
#include "loom/nn/conv.h"
#include "loom/nn/embedding.h"
#include "loom/nn/feed_forward.h"
#include "loom/nn/linear.h"
#include "loom/nn/merge.h"
#include "loom/nn/normalization.h"
#include "loom/nn/pooling.h"
#include "loom/nn/recurrent.h"
#include "loom/nn/shape.h"
#include "loom/ops/creation.h"

namespace loom::zoo {

using nn::Layer;

int64_t parameter_count(const Graph& graph) {
  int64_t n = 0;
  for (const Tensor& p : graph.parameters()) n += p.numel();
  return n;
}

Tensor Network::operator()(const Tensor& x) const {
  if (inputs.size() != 1) throw ValueError("zoo::Network '" + name + "': operator() needs a single-input model");
  // the cached plan only while it is still this graph's (same outputs and inputs)
  const auto same = [](const std::vector<nn::Layer>& a, const std::vector<nn::Layer>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const nn::Layer& l, const nn::Layer& r) { return l.impl() == r.impl(); });
  };
  if (plan && same(plan->graph().outputs(), graph.outputs()) && same(plan->graph().inputs(), graph.inputs()))
    return (*plan)(x);
  return graph.compile()(x);
}

std::vector<Tensor> Network::parameters() const { return graph.parameters(); }
int64_t Network::parameter_count() const { return zoo::parameter_count(graph); }

namespace {

Network finish(std::string name, std::vector<Layer> inputs, Layer output) {
  Network m;
  m.name = std::move(name);
  m.graph = Graph::build({output}, inputs);
  m.inputs = std::move(inputs);
  m.output = std::move(output);
  m.plan = std::make_shared<const Plan>(m.graph.compile());
  return m;
}

void require_positive(int64_t v, const char* what, const std::string& model) {
  if (v <= 0) throw ValueError("zoo::" + model + ": " + what + " must be positive, got " + std::to_string(v));
}

// conv (no bias) -> bn, as torchvision's conv/bn pairs.
Layer conv_bn(const Layer& x, int64_t filters, int64_t k, int64_t stride, int64_t pad, const std::string& conv_name,
              const std::string& bn_name) {
  nn::Conv2D c(x, filters, k, {.stride = stride, .padding = pad, .bias = false}, conv_name);
  return nn::BatchNorm(c, {}, bn_name);
}

Layer relu(const Layer& x, const std::string& name) { return nn::Activation(x, nn::relu, name); }

}  // namespace

Network mlp(int64_t in_units, const std::vector<int64_t>& hidden, int64_t out_units, const nn::ActivationFn& activation,
          double dropout) {
  require_positive(in_units, "in_units", "mlp");
  require_positive(out_units, "out_units", "mlp");
  nn::Input x(in_units, Float32, "input");
  Layer h = x;
  for (size_t i = 0; i < hidden.size(); ++i) {
    const std::string p = "hidden" + std::to_string(i);
    require_positive(hidden[i], "a hidden width", "mlp");
    h = nn::Linear(h, hidden[i], {}, p + ".linear");
    h = nn::Activation(h, activation, p + ".act");
    if (dropout > 0) h = nn::Dropout(h, dropout, /*seed=*/i + 1, p + ".dropout");
  }
  Layer out = nn::Linear(h, out_units, {}, "output");
  return finish("mlp", {x}, out);
}

Network lenet(int64_t num_classes) {
  require_positive(num_classes, "num_classes", "lenet");
  nn::Input x(Shape{-1, 1, 28, 28}, Float32, "input");
  Layer h = nn::Conv2D(x, 6, 5, {.padding = 2}, "conv1");
  h = nn::MaxPool2D(relu(h, "relu1"), 2, {}, "pool1");
  h = nn::Conv2D(h, 16, 5, {}, "conv2");
  h = nn::MaxPool2D(relu(h, "relu2"), 2, {}, "pool2");
  h = nn::Flatten(h, "flatten");
  h = relu(nn::Linear(h, 120, {}, "fc1"), "relu3");
  h = relu(nn::Linear(h, 84, {}, "fc2"), "relu4");
  Layer out = nn::Linear(h, num_classes, {}, "fc3");
  return finish("lenet", {x}, out);
}

Network fashion_cnn(int64_t num_classes, const FashionCnnOptions& options) {
  const std::string name = "fashion_cnn";
  require_positive(num_classes, "num_classes", name);
  require_positive(options.convs_per_block, "convs_per_block", name);
  require_positive(options.hidden, "hidden", name);
  if (options.widths.empty() || options.widths.size() > 4)
    throw ValueError("zoo::fashion_cnn: widths must give 1 to 4 blocks (each halves the 28x28 image), got " +
                     std::to_string(options.widths.size()));
  nn::Input image(Shape{-1, 1, 28, 28}, Float32, "image");
  nn::Layer x = image;
  int layer = 0;
  for (int64_t filters : options.widths) {
    require_positive(filters, "a block's width", name);
    for (int64_t c = 0; c < options.convs_per_block; ++c) {
      const std::string k = std::to_string(++layer);
      x = nn::Conv2D(x, filters, 3, {.padding = "same", .bias = false}, "conv" + k);
      x = nn::BatchNorm(x, {}, "bn" + k);
      x = nn::Activation(x, nn::relu);
    }
    x = nn::MaxPool2D(x, 2);
  }
  x = nn::Flatten(x);
  x = nn::Dropout(x, 0.25, 1, "dropout1");
  x = nn::Activation(nn::Linear(x, options.hidden, {.weight_init = nn::Init::he_uniform()}, "fc1"), nn::relu);
  x = nn::Dropout(x, 0.25, 2, "dropout2");
  nn::Linear logits(x, num_classes, {}, "logits");
  return finish(name, {image}, logits);
}

const std::vector<int64_t> kVggA = {64, 0, 128, 0, 256, 256, 0, 512, 512, 0, 512, 512, 0};
const std::vector<int64_t> kVggD = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
const std::vector<int64_t> kVggE = {64,  64,  0,   128, 128, 0,   256, 256, 256, 256, 0,
                                    512, 512, 512, 512, 0,   512, 512, 512, 512, 0};

Network vgg(const std::vector<int64_t>& config, int64_t num_classes, bool batch_norm, double dropout, int64_t in_channels,
          int64_t classifier_units, const std::string& name) {
  require_positive(num_classes, "num_classes", name);
  require_positive(in_channels, "in_channels", name);
  require_positive(classifier_units, "classifier_units", name);
  nn::Input x(Shape{-1, in_channels, -1, -1}, Float32, "input");
  Layer h = x;
  int idx = 0;  // torchvision's position in `features`
  auto f = [&](int i) { return "features." + std::to_string(i); };
  for (int64_t v : config) {
    if (v == 0) {
      h = nn::MaxPool2D(h, 2, {.stride = 2}, f(idx++));
      continue;
    }
    require_positive(v, "a configuration width", name);
    h = nn::Conv2D(h, v, 3, {.padding = 1}, f(idx++));
    if (batch_norm) h = nn::BatchNorm(h, {}, f(idx++));
    h = relu(h, f(idx++));
  }
  h = nn::AdaptiveAvgPool2D(h, {7, 7}, "avgpool");
  h = nn::Flatten(h, "flatten");
  h = relu(nn::Linear(h, classifier_units, {}, "classifier.0"), "classifier.1");
  if (dropout > 0) h = nn::Dropout(h, dropout, /*seed=*/1, "classifier.2");
  h = relu(nn::Linear(h, classifier_units, {}, "classifier.3"), "classifier.4");
  if (dropout > 0) h = nn::Dropout(h, dropout, /*seed=*/2, "classifier.5");
  Layer out = nn::Linear(h, num_classes, {}, "classifier.6");
  return finish(name, {x}, out);
}

Network vgg11(int64_t num_classes, bool batch_norm) { return vgg(kVggA, num_classes, batch_norm, 0.5, 3, 4096, batch_norm ? "vgg11_bn" : "vgg11"); }
Network vgg16(int64_t num_classes, bool batch_norm) { return vgg(kVggD, num_classes, batch_norm, 0.5, 3, 4096, batch_norm ? "vgg16_bn" : "vgg16"); }
Network vgg19(int64_t num_classes, bool batch_norm) { return vgg(kVggE, num_classes, batch_norm, 0.5, 3, 4096, batch_norm ? "vgg19_bn" : "vgg19"); }

Network resnet(const std::vector<int64_t>& blocks_per_stage, int64_t num_classes, int64_t in_channels, const std::string& name) {
  require_positive(num_classes, "num_classes", name);
  require_positive(in_channels, "in_channels", name);
  if (blocks_per_stage.size() != 4)
    throw ValueError("zoo::" + name + ": blocks_per_stage must give 4 stages, got " + std::to_string(blocks_per_stage.size()));
  nn::Input x(Shape{-1, in_channels, -1, -1}, Float32, "input");
  Layer h = relu(conv_bn(x, 64, 7, 2, 3, "conv1", "bn1"), "relu");
  h = nn::MaxPool2D(h, 3, {.stride = 2, .padding = 1}, "maxpool");
  int64_t channels = 64;
  for (size_t s = 0; s < 4; ++s) {
    const int64_t width = 64 << s;
    require_positive(blocks_per_stage[s], "a stage's block count", name);
    for (int64_t b = 0; b < blocks_per_stage[s]; ++b) {
      const std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(b) + ".";
      const int64_t stride = (b == 0 && s > 0) ? 2 : 1;
      Layer identity = h;
      Layer y = relu(conv_bn(h, width, 3, stride, 1, p + "conv1", p + "bn1"), p + "relu1");
      y = conv_bn(y, width, 3, 1, 1, p + "conv2", p + "bn2");
      if (stride != 1 || channels != width) identity = conv_bn(h, width, 1, stride, 0, p + "downsample.0", p + "downsample.1");
      h = relu(nn::Add(y, identity, p + "add"), p + "relu2");
      channels = width;
    }
  }
  h = nn::GlobalPool(h, nn::GlobalPool::Mode::Avg, "avgpool");
  Layer out = nn::Linear(h, num_classes, {}, "fc");
  return finish(name, {x}, out);
}

Network resnet18(int64_t num_classes) { return resnet({2, 2, 2, 2}, num_classes, 3, "resnet18"); }
Network resnet34(int64_t num_classes) { return resnet({3, 4, 6, 3}, num_classes, 3, "resnet34"); }

Network densenet(int64_t growth_rate, const std::vector<int64_t>& block_config, int64_t num_init_features, int64_t bn_size,
               double compression, int64_t num_classes, int64_t in_channels, const std::string& name) {
  require_positive(growth_rate, "growth_rate", name);
  require_positive(num_init_features, "num_init_features", name);
  require_positive(bn_size, "bn_size", name);
  require_positive(num_classes, "num_classes", name);
  require_positive(in_channels, "in_channels", name);
  if (!(compression > 0 && compression <= 1)) throw ValueError("zoo::" + name + ": compression must lie in (0, 1]");
  nn::Input x(Shape{-1, in_channels, -1, -1}, Float32, "input");
  Layer h = relu(conv_bn(x, num_init_features, 7, 2, 3, "features.conv0", "features.norm0"), "features.relu0");
  h = nn::MaxPool2D(h, 3, {.stride = 2, .padding = 1}, "features.pool0");
  int64_t features = num_init_features;
  for (size_t bi = 0; bi < block_config.size(); ++bi) {
    const std::string block = "features.denseblock" + std::to_string(bi + 1) + ".";
    for (int64_t li = 0; li < block_config[bi]; ++li) {
      const std::string p = block + "denselayer" + std::to_string(li + 1) + ".";
      Layer y = relu(nn::BatchNorm(h, {}, p + "norm1"), p + "relu1");
      y = nn::Conv2D(y, bn_size * growth_rate, 1, {.bias = false}, p + "conv1");
      y = relu(nn::BatchNorm(y, {}, p + "norm2"), p + "relu2");
      y = nn::Conv2D(y, growth_rate, 3, {.padding = 1, .bias = false}, p + "conv2");
      h = nn::Concat({h, y}, 1, p + "concat");
      features += growth_rate;
    }
    if (bi + 1 != block_config.size()) {
      const std::string t = "features.transition" + std::to_string(bi + 1) + ".";
      const int64_t out = static_cast<int64_t>(static_cast<double>(features) * compression);
      h = relu(nn::BatchNorm(h, {}, t + "norm"), t + "relu");
      h = nn::Conv2D(h, out, 1, {.bias = false}, t + "conv");
      h = nn::AvgPool2D(h, 2, {.stride = 2}, t + "pool");
      features = out;
    }
  }
  h = relu(nn::BatchNorm(h, {}, "features.norm5"), "relu");
  h = nn::GlobalPool(h, nn::GlobalPool::Mode::Avg, "avgpool");
  Layer out = nn::Linear(h, num_classes, {}, "classifier");
  return finish(name, {x}, out);
}

Network densenet121(int64_t num_classes) { return densenet(32, {6, 12, 24, 16}, 64, 4, 0.5, num_classes, 3, "densenet121"); }

Network unet(int64_t in_channels, int64_t num_classes, int64_t base_width, int64_t depth, bool batch_norm) {
  require_positive(in_channels, "in_channels", "unet");
  require_positive(num_classes, "num_classes", "unet");
  require_positive(base_width, "base_width", "unet");
  if (depth < 0 || depth > 8) throw ValueError("zoo::unet: depth must lie in [0, 8], got " + std::to_string(depth));
  nn::Input x(Shape{-1, in_channels, -1, -1}, Float32, "input");
  auto double_conv = [&](Layer h, int64_t width, const std::string& p) {
    for (int i = 1; i <= 2; ++i) {
      const std::string n = std::to_string(i);
      h = nn::Conv2D(h, width, 3, {.padding = 1, .bias = !batch_norm}, p + "conv" + n);
      if (batch_norm) h = nn::BatchNorm(h, {}, p + "bn" + n);
      h = relu(h, p + "relu" + n);
    }
    return h;
  };
  std::vector<Layer> skips;
  Layer h = x;
  int64_t width = base_width;
  for (int64_t d = 0; d < depth; ++d) {
    const std::string p = "down" + std::to_string(d) + ".";
    h = double_conv(h, width, p);
    skips.push_back(h);
    h = nn::MaxPool2D(h, 2, {.stride = 2}, p + "pool");
    width *= 2;
  }
  h = double_conv(h, width, "bottleneck.");
  for (int64_t d = depth - 1; d >= 0; --d) {
    const std::string p = "up" + std::to_string(d) + ".";
    width /= 2;
    h = nn::Conv2DTranspose(h, width, 2, {.stride = 2}, p + "upconv");
    h = nn::Concat({skips[static_cast<size_t>(d)], h}, 1, p + "concat");
    h = double_conv(h, width, p);
  }
  Layer out = nn::Conv2D(h, num_classes, 1, {}, "head");
  return finish("unet", {x}, out);
}

Network lstm_lm(int64_t vocab_size, int64_t embedding, int64_t hidden, int64_t n_layers, double dropout) {
  require_positive(vocab_size, "vocab_size", "lstm_lm");
  require_positive(embedding, "embedding", "lstm_lm");
  require_positive(hidden, "hidden", "lstm_lm");
  require_positive(n_layers, "n_layers", "lstm_lm");
  nn::Input ids(Shape{-1, -1}, Int64, "ids");
  Layer h = nn::Lookup(ids, vocab_size, embedding, {}, "embedding");
  for (int64_t i = 0; i < n_layers; ++i) {
    if (i > 0 && dropout > 0) h = nn::Dropout(h, dropout, /*seed=*/static_cast<uint64_t>(i), "lstm.dropout" + std::to_string(i));
    h = nn::RNN(h, hidden, {.cell = nn::CellKind::LSTM}, "lstm.l" + std::to_string(i));
  }
  Layer out = nn::Linear(h, vocab_size, {}, "decoder");
  return finish("lstm_lm", {ids}, out);
}

Network transformer_classifier(int64_t vocab_size, int64_t seq_len, int64_t d_model, int64_t n_heads, int64_t ff_units,
                             int64_t n_layers, int64_t num_classes, double dropout) {
  const std::string m = "transformer_classifier";
  require_positive(vocab_size, "vocab_size", m);
  require_positive(seq_len, "seq_len", m);
  require_positive(d_model, "d_model", m);
  require_positive(n_heads, "n_heads", m);
  require_positive(ff_units, "ff_units", m);
  require_positive(num_classes, "num_classes", m);
  if (d_model % n_heads != 0)
    throw ValueError("zoo::" + m + ": d_model " + std::to_string(d_model) + " must be a multiple of n_heads " + std::to_string(n_heads));
  nn::Input ids(Shape{-1, seq_len}, Int64, "ids");
  Layer tok = nn::Lookup(ids, vocab_size, d_model, {}, "embedding");
  // learned positions: a (seq_len, d_model) table read at 0..seq_len-1, broadcast over the batch
  nn::Constant positions(arange(seq_len, Int64), "positions");
  Layer pos = nn::Lookup(positions, seq_len, d_model, {.init = nn::Init::normal(0, 0.02)}, "pos_embedding");
  Layer h = nn::Add(tok, pos, "embed");
  if (dropout > 0) h = nn::Dropout(h, dropout, /*seed=*/1, "embed_dropout");
  for (int64_t i = 0; i < n_layers; ++i)
    h = nn::TransformerEncoderLayer(h, n_heads, {.ff_units = ff_units, .dropout = dropout}, std::nullopt,
                                    "encoder.layers." + std::to_string(i));
  h = nn::Transpose(h, {1, 0}, "to_channels");           // (batch, d_model, seq_len)
  h = nn::GlobalPool(h, nn::GlobalPool::Mode::Avg, "mean_pool");  // mean over time
  Layer out = nn::Linear(h, num_classes, {}, "classifier");
  return finish(m, {ids}, out);
}

namespace {

// The activation a GPT-2 config names, by transformers' ACT2FN names.
const nn::ActivationFn& gpt_activation(const std::string& name) {
  if (name == "gelu_new" || name == "gelu_pytorch_tanh") return nn::gelu_tanh;  // both GELU's tanh approximation
  if (name == "gelu") return nn::gelu;
  if (name == "relu") return nn::relu;
  if (name == "silu" || name == "swish") return nn::silu;
  throw ValueError("zoo::gpt: activation_function '" + name + "' (valid: gelu_new, gelu_pytorch_tanh, gelu, relu, silu)");
}

// The token ids every decoder takes: (batch, positions), both known only at run time.
nn::Input token_ids() { return nn::Input(Shape{-1, -1}, Int64, "input_ids"); }

}  // namespace

Network gpt(const GptConfig& c) {
  const std::string m = "gpt";
  require_positive(c.vocab_size, "vocab_size", m);
  require_positive(c.n_positions, "n_positions", m);
  require_positive(c.n_embd, "n_embd", m);
  require_positive(c.n_layer, "n_layer", m);
  require_positive(c.n_head, "n_head", m);
  if (c.n_inner < 0) throw ValueError("zoo::gpt: n_inner must be positive, or 0 for 4 * n_embd, got " + std::to_string(c.n_inner));
  if (c.n_embd % c.n_head != 0)
    throw ValueError("zoo::gpt: n_embd " + std::to_string(c.n_embd) + " must be a multiple of n_head " + std::to_string(c.n_head));
  const nn::ActivationFn& act = gpt_activation(c.activation_function);
  const nn::Init w = nn::Init::normal(0, c.initializer_range);
  const int64_t inner = c.n_inner > 0 ? c.n_inner : 4 * c.n_embd;
  nn::Input ids = token_ids();
  nn::Lookup wte(ids, c.vocab_size, c.n_embd, {.init = w}, "transformer.wte");
  Layer h = nn::Add(wte, nn::PositionEmbedding(ids, c.n_positions, c.n_embd, w, "transformer.wpe"), "transformer.embed");
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "transformer.h." + std::to_string(i);
    Layer x = nn::LayerNorm(h, c.layer_norm_epsilon, p + ".ln_1");
    h = nn::Add(h, nn::MultiHeadAttention(x, x, x, c.n_head, {.causal = true}, std::nullopt, p + ".attn"), p + ".attn_residual");
    x = nn::LayerNorm(h, c.layer_norm_epsilon, p + ".ln_2");
    x = nn::Linear(x, inner, {.weight_init = w}, p + ".mlp.c_fc");
    x = nn::Linear(nn::Activation(x, act, p + ".mlp.act"), c.n_embd, {.weight_init = w}, p + ".mlp.c_proj");
    h = nn::Add(h, x, p + ".mlp_residual");
  }
  h = nn::LayerNorm(h, c.layer_norm_epsilon, "transformer.ln_f");
  nn::LinearOptions head{.bias = false, .weight_init = w};
  if (c.tie_word_embeddings) {
    head.shared_weights = wte.state().param("weights");
    head.transpose_weights = true;
  }
  Network net = finish(m, {ids}, nn::Linear(h, c.vocab_size, head, "lm_head"));
  net.config = c;
  return net;
}

Network llama(const LlamaConfig& c) {
  const std::string m = "llama";
  require_positive(c.vocab_size, "vocab_size", m);
  require_positive(c.hidden_size, "hidden_size", m);
  require_positive(c.intermediate_size, "intermediate_size", m);
  require_positive(c.num_hidden_layers, "num_hidden_layers", m);
  require_positive(c.num_attention_heads, "num_attention_heads", m);
  require_positive(c.max_position_embeddings, "max_position_embeddings", m);
  const int64_t heads = c.num_attention_heads, kv = c.num_key_value_heads > 0 ? c.num_key_value_heads : heads;
  if (c.hidden_size % heads != 0)
    throw ValueError("zoo::llama: hidden_size " + std::to_string(c.hidden_size) + " must be a multiple of num_attention_heads " +
                     std::to_string(heads));
  if (c.num_key_value_heads < 0 || heads % kv != 0)
    throw ValueError("zoo::llama: num_key_value_heads " + std::to_string(c.num_key_value_heads) + " must divide num_attention_heads " +
                     std::to_string(heads) + " (or be 0 for as many)");
  if ((c.hidden_size / heads) % 2 != 0)
    throw ValueError("zoo::llama: the head size " + std::to_string(c.hidden_size / heads) + " must be even (the rotary embedding turns pairs)");
  const nn::Init w = nn::Init::normal(0, c.initializer_range);
  nn::Input ids = token_ids();
  nn::Lookup embed(ids, c.vocab_size, c.hidden_size, {.init = w}, "model.embed_tokens");
  Layer h = embed;
  const nn::AttentionOptions attention{.causal = true, .bias = c.attention_bias, .n_kv_heads = kv, .rotary = c.rope};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i);
    Layer x = nn::RMSNorm(h, c.rms_norm_eps, p + ".input_layernorm");
    h = nn::Add(h, nn::MultiHeadAttention(x, x, x, heads, attention, std::nullopt, p + ".self_attn"), p + ".attn_residual");
    x = nn::RMSNorm(h, c.rms_norm_eps, p + ".post_attention_layernorm");
    h = nn::Add(h, nn::SwiGLU(x, c.intermediate_size, w, p + ".mlp"), p + ".mlp_residual");
  }
  h = nn::RMSNorm(h, c.rms_norm_eps, "model.norm");
  nn::LinearOptions head{.bias = false, .weight_init = w};
  if (c.tie_word_embeddings) {
    head.shared_weights = embed.state().param("weights");
    head.transpose_weights = true;
  }
  Network net = finish(m, {ids}, nn::Linear(h, c.vocab_size, head, "lm_head"));
  net.config = c;
  return net;
}

}  // namespace loom::zoo
