#pragma once
// Recurrent cells and the RNN layer that unrolls one over a sequence. Parameters follow
// PyTorch's layout and gate order (w_ih (in, G*n), w_hh (n, G*n), b_ih, b_hh; LSTM gates
// i, f, g, o; GRU gates r, z, n) so parameter counts and results compare one to one.
//
// A layer has one output, so an LSTM cell's state travels packed: its `state` input and its
// output are [h, c] concatenated on the last axis (2 * n_units); LSTMCell::hidden(cell) picks h.
#include "loom/core/api.h"
#include "loom/nn/activation.h"
#include "loom/nn/attributes.h"
#include "loom/nn/init.h"
#include "loom/nn/layer.h"

namespace loom::nn {

enum class CellKind : uint8_t { RNN, LSTM, GRU };

struct LOOM_API CellOptions {
  ActivationFn activation = tanh;  // RNN cells only
  Init weight_init = Init::glorot_uniform();
  Init recurrent_init = Init::orthogonal();
  bool bias = true;
};

// What an RNNCell, LSTMCell or GRUCell is besides its inputs and state (nn/attributes.h); the
// cell's kind is the layer's kind, and the initializers only shape the first weights.
struct LOOM_API CellAttributes {
  CellKind cell = CellKind::RNN;  // RNNCell, LSTMCell or GRUCell: the kind says which, so it is not a saved field
  int64_t n_units = 0;
  ActivationFn activation = tanh;  // used by RNN cells only, saved by all
  bool bias = true;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("n_units", n_units, Field::sizes(1));
    visit("activation", activation);
    visit("bias", bias);
  }
};

// The cells' shape rule: inputs x (..., features) and state (..., state units), state units n
// (2 * n packed [h, c] for LSTM); the output has the state's units and the leading sizes of x
// and the state broadcast (a batch known in either, -1 where neither knows it).
// h' = activation(x w_ih + b_ih + h w_hh + b_hh)
class LOOM_API RNNCell : public Layer {
 public:
  RNNCell(const Layer& input, const Layer& state, int64_t n_units, CellOptions options = {}, const std::string& name = "");
};

// state and output: [h, c] (2 * n_units units)
class LOOM_API LSTMCell : public Layer {
 public:
  LSTMCell(const Layer& input, const Layer& state, int64_t n_units, CellOptions options = {}, const std::string& name = "");
  // The hidden part h of a packed LSTM state layer.
  static Layer hidden(const Layer& packed_state);
};

class LOOM_API GRUCell : public Layer {
 public:
  GRUCell(const Layer& input, const Layer& state, int64_t n_units, CellOptions options = {}, const std::string& name = "");
};

struct LOOM_API RNNOptions {
  CellKind cell = CellKind::LSTM;
  CellOptions cell_options{};
  bool return_sequences = true;  // (batch, time, units); else the last output (batch, units)
  bool reverse = false;          // run from the last step to the first
  bool bidirectional = false;    // forward and backward runs concatenated (2 * n_units)
  bool stateful = false;         // the final state of a call is the initial state of the next
};

// What an RNN layer is besides its input and state: `cell` is "RNN", "LSTM" or "GRU" (CellKind
// by its name, as saved), `activation` and `bias` are the cell's.
struct LOOM_API RNNAttributes {
  std::string cell = "LSTM";
  int64_t n_units = 0;
  bool return_sequences = true, reverse = false, bidirectional = false, stateful = false;
  ActivationFn activation = tanh;
  bool bias = true;
  template <class Visit>
  void fields(Visit&& visit) {
    visit("cell", cell);
    visit("n_units", n_units, Field::sizes(1));
    visit("return_sequences", return_sequences);
    visit("reverse", reverse);
    visit("bidirectional", bidirectional);
    visit("stateful", stateful);
    visit("activation", activation);
    visit("bias", bias);
  }
};

// Unrolls a cell over (batch, time, features); the same weights at every step. Shape rule:
// (batch, time, features) -> (batch, time, units) with return_sequences, else (batch, units), for
// any batch and time; units is n_units (2 * n_units bidirectional), features what w_ih takes.
class LOOM_API RNN : public Layer {
 public:
  RNN(const Layer& sequence, int64_t n_units, RNNOptions options = {}, const std::string& name = "");
  // Forgets the state kept between calls by a stateful RNN.
  void reset_state() const;
};

}  // namespace loom::nn
