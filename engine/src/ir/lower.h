// Lowering: one ScheduleItem (a fused piece of the lazy graph) → one kernel of IR.
//
// The kernel loops over every element of the output (one RANGE per output dim of size > 1) and
// computes the output value by walking the fused nodes from the output back to the inputs:
//  - a chain of movement ops is composed into a ViewStack and becomes index arithmetic
//    (offset + Σ idx·stride, masks become load gates), never a copy;
//  - elementwise ops become ALU instructions on the values of their sources at the same index;
//  - a reduce opens its own loop over the reduced axes around an accumulator (DEFINE_ACC / ASSIGN),
//    placed exactly where its value is needed, so reduces nest (sum of a matmul is one kernel).
// Global slots 0..n-1 are item.outputs (n > 1: a multi-output kernel, every output stored in the same
// loop), slots n.. are item.inputs in order.
#pragma once
#include "schedule/schedule.h"
#include "tensorscope/ir.h"

namespace ts {

ir::Kernel lower(const ScheduleItem& item);

}  // namespace ts
