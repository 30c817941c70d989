// einsum as a composition (torch.einsum semantics, tinygrad's approach): repeated letters in one
// operand take a diagonal; every operand is permuted/reshaped to one common letter order (missing
// letters are size 1, so EXPAND broadcasts them); the operands are multiplied and the letters not in
// the output are summed. The graph shows PERMUTE/RESHAPE → MUL → SUM, like matmul.
#include <map>
#include <set>

#include "tensor/ops_common.h"

namespace ts {

using namespace detail;

namespace {
std::string strip(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != ' ') out += c;
  return out;
}
// The labels of an operand's dims with "..." replaced by ellipsis labels: the last e of E labels
// ('0'..'9', then others below 'A'), right-aligned as broadcasting aligns them.
std::string expand_ellipsis(const std::string& term, int64_t ndim, int64_t E, const std::string& ell_labels) {
  size_t pos = term.find("...");
  if (pos == std::string::npos) {
    if (static_cast<int64_t>(term.size()) != ndim)
      throw std::invalid_argument("einsum: the subscripts '" + term + "' do not match an operand with " + std::to_string(ndim) + " dims");
    return term;
  }
  std::string rest = term.substr(0, pos) + term.substr(pos + 3);
  int64_t e = ndim - static_cast<int64_t>(rest.size());
  if (e < 0) throw std::invalid_argument("einsum: the subscripts '" + term + "' have more letters than the operand's " + std::to_string(ndim) + " dims");
  return term.substr(0, pos) + ell_labels.substr(E - e) + term.substr(pos + 3);
}
}  // namespace

Tensor Tensor::einsum(const std::string& formula_in, const std::vector<Tensor>& operands) {
  if (auto r = float16_rule(&Tensor::einsum, formula_in, operands)) return *r;
  std::string formula = strip(formula_in);
  size_t arrow = formula.find("->");
  std::string lhs = formula.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != operands.size())
    throw std::invalid_argument("einsum: the formula '" + formula_in + "' names " + std::to_string(terms.size()) +
                                " operands, but " + std::to_string(operands.size()) + " were given");
  int64_t E = 0;
  for (size_t i = 0; i < terms.size(); i++) {
    size_t pos = terms[i].find("...");
    if (pos != std::string::npos)
      E = std::max<int64_t>(E, operands[i].ndim() - static_cast<int64_t>(terms[i].size() - 3));
  }
  std::string ell;
  for (int64_t i = 0; i < E; i++) ell += static_cast<char>('0' + i);  // digits never appear as letters
  std::vector<std::string> labels;
  std::map<char, int> count;
  std::map<char, int64_t> size;
  std::vector<Tensor> ops;
  for (size_t i = 0; i < terms.size(); i++) {
    std::string lab = expand_ellipsis(terms[i], operands[i].ndim(), E, ell);
    for (char c : lab) count[c]++;  // before diagonals: "ii" uses i twice, so its implicit output is ()
    Tensor x = operands[i];
    // a repeated letter takes the diagonal of its two dims (appended last by diagonal())
    for (bool again = true; again;) {
      again = false;
      for (size_t a = 0; a < lab.size() && !again; a++)
        for (size_t b = a + 1; b < lab.size() && !again; b++)
          if (lab[a] == lab[b]) {
            x = x.diagonal(0, static_cast<int64_t>(a), static_cast<int64_t>(b));
            char c = lab[a];
            lab.erase(b, 1);
            lab.erase(a, 1);
            lab += c;
            again = true;
          }
    }
    for (size_t a = 0; a < lab.size(); a++) {
      int64_t s = x.shape()[a];
      auto [it, fresh] = size.try_emplace(lab[a], s);
      if (!fresh && it->second != s && it->second != 1 && s != 1)
        throw std::invalid_argument("einsum: the letter '" + std::string(1, lab[a]) + "' has sizes " + std::to_string(it->second) +
                                    " and " + std::to_string(s));
      if (!fresh && it->second == 1) it->second = s;
    }
    labels.push_back(lab);
    ops.push_back(x);
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = formula.substr(arrow + 2);
    size_t pos = out.find("...");
    if (pos != std::string::npos) out = out.substr(0, pos) + ell + out.substr(pos + 3);
    for (char c : out)
      if (!size.count(c)) throw std::invalid_argument("einsum: the output letter '" + std::string(1, c) + "' is not in any operand");
  } else {  // implicit output: the ellipsis dims, then the letters used once, alphabetically
    out = ell;
    for (auto& [c, n] : count)
      if (n == 1 && (c < '0' || c > '9')) out += c;
  }
  std::string all = out;
  for (auto& [c, n] : size)
    if (all.find(c) == std::string::npos) all += c;
  Tensor prod;
  for (size_t i = 0; i < ops.size(); i++) {
    std::vector<int64_t> order;
    Shape s;
    for (char c : all) {
      size_t a = labels[i].find(c);
      if (a != std::string::npos) {
        order.push_back(static_cast<int64_t>(a));
        s.push_back(ops[i].shape()[a]);
      } else {
        s.push_back(1);
      }
    }
    Tensor t = ops[i].permute(order).reshape(s);
    prod = prod.defined() ? prod.mul(t) : t;
  }
  Shape full;
  for (char c : all) full.push_back(size[c]);
  prod = prod.expand(full);
  std::vector<int64_t> contracted;
  for (size_t a = out.size(); a < all.size(); a++) contracted.push_back(static_cast<int64_t>(a));
  return contracted.empty() ? prod : prod.sum(contracted);
}

}  // namespace ts
