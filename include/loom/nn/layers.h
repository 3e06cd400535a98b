#pragma once
// The layer catalogue: every kind of layer, one header each. Each kind is a Layer handle with a
// constructor taking its input layers and options; parameters are created in the constructor
// (the inputs' units are known). The common kinds also have a constructor without the input
// (Keras style): the layer is built by its first call, dense(x), and later calls share its state
// (Layer::operator(), unbound_layer).
#include "loom/nn/activation.h"
#include "loom/nn/attention.h"
#include "loom/nn/conv.h"
#include "loom/nn/decoder_block.h"
#include "loom/nn/dropout.h"
#include "loom/nn/embedding.h"
#include "loom/nn/feed_forward.h"
#include "loom/nn/input.h"
#include "loom/nn/lambda.h"
#include "loom/nn/linear.h"
#include "loom/nn/merge.h"
#include "loom/nn/normalization.h"
#include "loom/nn/pooling.h"
#include "loom/nn/recurrent.h"
#include "loom/nn/shape.h"
#include "loom/nn/sparse.h"
