#pragma once
// The model zoo: builders for standard architectures as Loom layer graphs. Each returns a Network
// holding the Graph (Graph::build(outputs, inputs)), its Input layer(s) and its output layer.
// Layouts follow PyTorch / torchvision so parameter counts match one to one
// (tests/zoo/check_params.py compares them); layers carry torchvision's module names
// ("features.0", "layer1.0.conv1", ...) where the reference has them.
//
// Dropout layers inside one model get distinct seeds (1, 2, ...), so their masks differ.
//
// Image models take channels-first float inputs (batch, channels, height, width) with dynamic
// height and width unless stated; the output is the logits (no softmax).
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "loom/core/api.h"
#include "loom/graph/graph.h"
#include "loom/nn/layers.h"
#include "loom/ops/quantized.h"
#include "loom/ops/rotary.h"

namespace loom::zoo {

// GPT-2's configuration, field for field as transformers' GPT2Config (config.json) names it.
struct LOOM_API GptConfig {
  int64_t vocab_size = 50257;
  int64_t n_positions = 1024;  // learned positions: the longest sequence
  int64_t n_embd = 768;
  int64_t n_layer = 12;
  int64_t n_head = 12;
  int64_t n_inner = 0;  // the MLP's width; 0 (config.json's null) for 4 * n_embd
  // "gelu_new" or "gelu_pytorch_tanh" (GELU's tanh approximation, GPT-2's), "gelu", "relu", "silu"
  std::string activation_function = "gelu_new";
  double layer_norm_epsilon = 1e-5;
  bool tie_word_embeddings = true;  // lm_head reads wte's table (GPT-2's); false: its own weights
  double initializer_range = 0.02;  // the standard deviation of the weights drawn at build
};

// Llama's configuration, as transformers' LlamaConfig names it. `rope` holds rope_theta (base)
// and rope_scaling (linear, or Llama 3's llama3_factor, low / high_freq_factor and
// original_max_position_embeddings).
struct LOOM_API LlamaConfig {
  int64_t vocab_size = 32000;
  int64_t hidden_size = 4096;
  int64_t intermediate_size = 11008;
  int64_t num_hidden_layers = 32;
  int64_t num_attention_heads = 32;
  int64_t num_key_value_heads = 0;  // grouped-query attention: a divisor of the heads; 0 for as many as the heads
  int64_t max_position_embeddings = 2048;  // written to config.json; RoPE itself has no table
  double rms_norm_eps = 1e-6;
  RotaryOptions rope;
  bool attention_bias = false;  // biases on q, k, v and o_proj
  bool tie_word_embeddings = false;  // lm_head reads embed_tokens' table
  double initializer_range = 0.02;
};

struct LOOM_API Network {
  std::string name;
  Graph graph;
  std::vector<nn::Layer> inputs;  // Input layers, in the order graph.inputs() takes them
  nn::Layer output;
  // `graph` compiled once (shape-polymorphic: any batch and image size), what operator() runs.
  // The zoo's builders set it; a Network assembled by hand without it (or whose graph was
  // replaced since) compiles its graph on each call.
  std::shared_ptr<const Plan> plan;
  // The configuration a language model was built from (gpt, llama; io::save_hf_checkpoint writes
  // it as config.json); monostate for the other models.
  std::variant<std::monostate, GptConfig, LlamaConfig> config;
  // Weight-only int8 forms of a language model's linear maps, as an int8 checkpoint holds them
  // (io::load_hf_checkpoint; docs/text.md, "int8 checkpoints"), by the parameter each stands for,
  // "<layer>/<parameter>" in Loom's (in, out) layout ("transformer.h.0.attn/q_weight",
  // "lm_head/weights" for the head, tied or not). The graph's float weights are then their
  // dequantized copies; train::CachedDecoder reads these instead, and io::save_hf_checkpoint
  // writes them back as they are. Empty for a float model. Not updated by training.
  std::map<std::string, QuantizedMatrix> int8;

  // The i-th Input layer (to set_value it before output()).
  nn::Input input(size_t i = 0) const { return nn::Input(inputs.at(i).impl()); }
  // Runs the graph on `x` (single-input models) in the current mode, through `plan`.
  Tensor operator()(const Tensor& x) const;
  // Trainable tensors of every layer of the graph, each once (shared weights counted once).
  std::vector<Tensor> parameters() const;
  int64_t parameter_count() const;
};

// The number of elements of a graph's trainable tensors (Graph::parameters()), each once.
LOOM_API int64_t parameter_count(const Graph& graph);

// Input (batch, in_units) -> [Linear(h) -> activation -> Dropout(dropout)] per hidden width ->
// Linear(out_units). Dropout layers are left out when dropout is 0.
LOOM_API Network mlp(int64_t in_units, const std::vector<int64_t>& hidden, int64_t out_units,
          const nn::ActivationFn& activation = nn::relu, double dropout = 0.0);

// LeNet-5 for (batch, 1, 28, 28): Conv(6, 5x5, pad 2) -> ReLU -> MaxPool 2 -> Conv(16, 5x5) ->
// ReLU -> MaxPool 2 -> Flatten(400) -> Linear(120) -> ReLU -> Linear(84) -> ReLU ->
// Linear(num_classes). 61,706 parameters for 10 classes.
LOOM_API Network lenet(int64_t num_classes = 10);

// The main job's Fashion-MNIST CNN for (N, 1, 28, 28): per entry of `widths` a block of
// `convs_per_block` 3x3 convolutions of that many filters ("same", no bias), each followed by
// BatchNorm and ReLU, and a 2x2 max pool; then Flatten -> Dropout(0.25) -> Linear(hidden) ->
// ReLU -> Dropout(0.25) -> Linear(num_classes). Layers are named conv1, bn1, conv2, ... in
// order. The defaults are the main job's model (3 blocks of 32, 64, 128 filters, hidden 256:
// 390,634 parameters); {.widths = {32, 64}, .hidden = 128} is the CNN of the training-step
// benchmarks (421,738 parameters).
struct LOOM_API FashionCnnOptions {
  std::vector<int64_t> widths{32, 64, 128};
  int64_t convs_per_block = 1;
  int64_t hidden = 256;
};
LOOM_API Network fashion_cnn(int64_t num_classes = 10, const FashionCnnOptions& options = {});

// VGG from a torchvision configuration: integers are 3x3 conv (padding 1) + ReLU widths, 0 is a
// 2x2 max pool ("M"). Then AdaptiveAvgPool2D(7x7), Flatten, Linear(512*7*7, 4096) -> ReLU ->
// Dropout -> Linear(4096, 4096) -> ReLU -> Dropout -> Linear(4096, num_classes).
// batch_norm inserts BatchNorm after each conv (torchvision's vgg*_bn); classifier_units
// replaces the 4096 (torchvision's value) for small variants.
LOOM_API Network vgg(const std::vector<int64_t>& config, int64_t num_classes = 1000, bool batch_norm = false, double dropout = 0.5,
          int64_t in_channels = 3, int64_t classifier_units = 4096, const std::string& name = "vgg");
LOOM_API Network vgg11(int64_t num_classes = 1000, bool batch_norm = false);  // configuration "A"
LOOM_API Network vgg16(int64_t num_classes = 1000, bool batch_norm = false);  // configuration "D"
LOOM_API Network vgg19(int64_t num_classes = 1000, bool batch_norm = false);  // configuration "E"
LOOM_API extern const std::vector<int64_t> kVggA, kVggD, kVggE;

// ResNet with torchvision's BasicBlock: conv1 7x7/2 pad 3 (no bias) -> bn1 -> ReLU ->
// MaxPool 3/2 pad 1 -> layer1..layer4 (64, 128, 256, 512 channels; the first block of layers
// 2-4 has stride 2 and a 1x1 conv + bn downsample) -> global average pool -> fc(num_classes).
LOOM_API Network resnet(const std::vector<int64_t>& blocks_per_stage, int64_t num_classes = 1000, int64_t in_channels = 3,
             const std::string& name = "resnet");
LOOM_API Network resnet18(int64_t num_classes = 1000);  // blocks (2, 2, 2, 2)
LOOM_API Network resnet34(int64_t num_classes = 1000);  // blocks (3, 4, 6, 3)

// DenseNet-BC as torchvision: conv0 7x7/2 -> norm0 -> relu0 -> pool0 (max 3/2 pad 1), dense
// blocks of layers BN-ReLU-Conv1x1(bn_size*growth)-BN-ReLU-Conv3x3(growth) concatenated along
// channels, transitions BN-ReLU-Conv1x1(features*compression)-AvgPool 2, norm5, ReLU, global
// average pool, classifier Linear(num_classes). Convolutions have no bias.
LOOM_API Network densenet(int64_t growth_rate, const std::vector<int64_t>& block_config, int64_t num_init_features,
               int64_t bn_size = 4, double compression = 0.5, int64_t num_classes = 1000, int64_t in_channels = 3,
               const std::string& name = "densenet");
LOOM_API Network densenet121(int64_t num_classes = 1000);  // growth 32, blocks (6, 12, 24, 16), 64 initial features

// U-Net (Ronneberger et al.) with same-padded convolutions: `depth` down steps of
// [DoubleConv -> MaxPool 2], a DoubleConv bottleneck of base_width * 2^depth channels, `depth`
// up steps of [Conv2DTranspose(c/2, 2x2, stride 2) -> Concat(skip, axis 1) -> DoubleConv(c/2)],
// and a 1x1 conv to num_classes. DoubleConv is two [Conv 3x3 pad 1 -> (BatchNorm) -> ReLU];
// with batch_norm the convs have no bias. Height and width must be multiples of 2^depth.
LOOM_API Network unet(int64_t in_channels = 1, int64_t num_classes = 2, int64_t base_width = 64, int64_t depth = 4,
           bool batch_norm = false);

// LSTM language model: ids (batch, time) int64 -> Lookup(vocab, embedding) -> n_layers LSTM
// layers of `hidden` units (Dropout(dropout) between layers, as nn.LSTM's dropout) ->
// Linear(vocab): logits (batch, time, vocab).
LOOM_API Network lstm_lm(int64_t vocab_size, int64_t embedding, int64_t hidden, int64_t n_layers = 2, double dropout = 0.0);

// Transformer encoder classifier: ids (batch, seq_len) int64 -> Lookup(vocab, d_model) + a
// learned positional embedding (seq_len, d_model) -> n_layers TransformerEncoderLayer (post-norm,
// ReLU, as torch.nn.TransformerEncoderLayer(batch_first=True)) -> mean over time ->
// Linear(num_classes).
LOOM_API Network transformer_classifier(int64_t vocab_size, int64_t seq_len, int64_t d_model, int64_t n_heads, int64_t ff_units,
                             int64_t n_layers, int64_t num_classes, double dropout = 0.1);

// GPT-2 (transformers' GPT2LMHeadModel) as a graph on token ids (batch, T) int64, T at most
// n_positions: transformer.wte (Lookup) + transformer.wpe (PositionEmbedding), n_layer pre-norm
// blocks transformer.h.<i> [ln_1 (LayerNorm) -> attn (causal MultiHeadAttention with biases) ->
// residual Add -> ln_2 -> mlp.c_fc (Linear, n_inner) -> activation -> mlp.c_proj (Linear) ->
// residual Add], transformer.ln_f, and lm_head, a Linear without bias reading wte's table
// transposed (tied: one tensor, counted once; its own (n_embd, vocab) weights when
// tie_word_embeddings is false). Output: logits (batch, T, vocab_size). No dropout
// layers (an inference graph: transformers' dropouts are identities in eval mode). Layer names
// are transformers' module names; the attention's q, k and v are apart where GPT-2 packs them in
// c_attn (io::hf_torch_map splits them).
LOOM_API Network gpt(const GptConfig& config = {});

// Llama (transformers' LlamaForCausalLM) on token ids (batch, T) int64: model.embed_tokens
// (Lookup), num_hidden_layers blocks model.layers.<i> [input_layernorm (RMSNorm) -> self_attn
// (causal MultiHeadAttention: grouped-query with num_key_value_heads, the rotary embedding of
// `rope`, biases only with attention_bias) -> residual Add -> post_attention_layernorm -> mlp
// (SwiGLU, intermediate_size) -> residual Add], model.norm (RMSNorm), and lm_head: a Linear
// without bias, its own (hidden, vocab) weights, or embed_tokens' table transposed with
// tie_word_embeddings. Output: logits (batch, T, vocab_size).
LOOM_API Network llama(const LlamaConfig& config = {});

}  // namespace loom::zoo
