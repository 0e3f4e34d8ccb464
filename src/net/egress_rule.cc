// IpAddress, Cidr and EgressRule (gnomon/net.h): pure functions over addresses.
#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "gnomon/net.h"

namespace gnomon::net {
namespace {

constexpr std::array<uint8_t, 12> kMappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool IsMapped(const IpAddress& a) {
  return !a.is_v4() && std::equal(kMappedPrefix.begin(), kMappedPrefix.end(), a.bytes());
}

std::string Join(const std::vector<Cidr>& blocks) {
  std::string out;
  for (const Cidr& c : blocks) {
    if (!out.empty()) out += ", ";
    out += c.ToString();
  }
  return out;
}

}  // namespace

IpAddress IpAddress::V4(const std::array<uint8_t, 4>& bytes) {
  IpAddress a;
  a.v4_ = true;
  std::copy(bytes.begin(), bytes.end(), a.bytes_.begin());
  return a;
}

IpAddress IpAddress::V6(const std::array<uint8_t, 16>& bytes) {
  IpAddress a;
  a.v4_ = false;
  a.bytes_ = bytes;
  return a;
}

std::optional<IpAddress> IpAddress::Parse(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
    if (text.find(':') == std::string_view::npos) return std::nullopt;  // "[1.2.3.4]"
  }
  // inet_pton wants a NUL-terminated string; the longest IPv6 text is 45 characters.
  if (text.empty() || text.size() > 45) return std::nullopt;
  char buf[46];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  std::array<uint8_t, 4> v4;
  if (inet_pton(AF_INET, buf, v4.data()) == 1) return V4(v4);
  std::array<uint8_t, 16> v6;
  if (inet_pton(AF_INET6, buf, v6.data()) == 1) return V6(v6);
  return std::nullopt;
}

IpAddress IpAddress::Unmapped() const {
  if (!IsMapped(*this)) return *this;
  return V4({bytes_[12], bytes_[13], bytes_[14], bytes_[15]});
}

std::string IpAddress::ToString() const {
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(v4_ ? AF_INET : AF_INET6, bytes_.data(), buf, sizeof buf);
  return buf;
}

Result<Cidr> Cidr::Parse(std::string_view text) {
  const std::string quoted = "\"" + std::string(text) + "\"";
  const size_t slash = text.find('/');
  const std::optional<IpAddress> address = IpAddress::Parse(text.substr(0, slash));
  if (!address) {
    return InvalidArgumentError(quoted + ": \"" + std::string(text.substr(0, slash)) +
                                "\" is not an IP address");
  }
  const int bits = address->bit_length();
  int prefix = bits;
  if (slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), prefix);
    if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
      return InvalidArgumentError(quoted + ": the prefix length \"" + std::string(digits) +
                                  "\" is not a number");
    }
    if (prefix < 0 || prefix > bits) {
      return InvalidArgumentError(quoted + ": prefix length " + std::to_string(prefix) +
                                  " is out of range 0-" + std::to_string(bits));
    }
  }
  Cidr cidr;
  cidr.network = *address;
  cidr.prefix_length = prefix;
  // The block with its host bits cleared; they must have been clear already.
  std::array<uint8_t, 16> masked{};
  const int n = bits / 8;
  for (int i = 0; i < n; ++i) {
    const int keep = std::clamp(prefix - 8 * i, 0, 8);
    masked[i] = static_cast<uint8_t>(address->bytes()[i] & (0xff00 >> keep));
  }
  const IpAddress network = address->is_v4()
                                ? IpAddress::V4({masked[0], masked[1], masked[2], masked[3]})
                                : IpAddress::V6(masked);
  if (!(network == *address)) {
    Cidr hint;
    hint.network = network;
    hint.prefix_length = prefix;
    return InvalidArgumentError(quoted + ": host bits are set (the block is " + hint.ToString() +
                                ")");
  }
  if (IsMapped(cidr.network) && prefix >= 96) {
    cidr.network = cidr.network.Unmapped();
    cidr.prefix_length = prefix - 96;
  }
  return cidr;
}

bool Cidr::Contains(const IpAddress& address) const {
  if (address.is_v4() != network.is_v4()) return false;
  const int full = prefix_length / 8;
  if (!std::equal(network.bytes(), network.bytes() + full, address.bytes())) return false;
  const int rest = prefix_length % 8;
  if (rest == 0) return true;
  const uint8_t mask = static_cast<uint8_t>(0xff00 >> rest);
  return (network.bytes()[full] & mask) == (address.bytes()[full] & mask);
}

std::string Cidr::ToString() const {
  return network.ToString() + "/" + std::to_string(prefix_length);
}

EgressRule EgressRule::Default() {
  EgressRule rule;
  rule.deny = {*Cidr::Parse("169.254.0.0/16"), *Cidr::Parse("fe80::/10")};
  return rule;
}

Result<EgressRule> EgressRule::Parse(const std::vector<std::string>& allow,
                                     const std::vector<std::string>& deny) {
  EgressRule rule;
  const auto add = [](const std::vector<std::string>& entries, std::string_view list,
                      std::vector<Cidr>& out) -> Status {
    for (size_t i = 0; i < entries.size(); ++i) {
      Result<Cidr> cidr = Cidr::Parse(entries[i]);
      if (!cidr.ok()) {
        return cidr.status().WithPrefix("egress_" + std::string(list) + "[" + std::to_string(i) +
                                        "]");
      }
      if (std::find(out.begin(), out.end(), *cidr) == out.end()) out.push_back(*cidr);
    }
    return Status::Ok();
  };
  GNOMON_RETURN_IF_ERROR(add(allow, "allow", rule.allow));
  GNOMON_RETURN_IF_ERROR(add(deny, "deny", rule.deny));
  return rule;
}

Status CheckEgress(const EgressRule& rule, const IpAddress& address) {
  const IpAddress a = address.Unmapped();
  for (const Cidr& block : rule.deny) {
    if (block.Contains(a)) {
      return FailedPreconditionError("egress: " + a.ToString() + " is denied by egress_deny " +
                                     block.ToString());
    }
  }
  if (rule.allow.empty()) return Status::Ok();
  for (const Cidr& block : rule.allow) {
    if (block.Contains(a)) return Status::Ok();
  }
  return FailedPreconditionError("egress: " + a.ToString() + " is not in egress_allow (" +
                                 Join(rule.allow) + ")");
}

Status CheckEgress(const EgressRule& rule, std::string_view ip_literal) {
  const std::optional<IpAddress> address = IpAddress::Parse(ip_literal);
  if (!address) {
    return InvalidArgumentError("egress: \"" + std::string(ip_literal) + "\" is not an IP address");
  }
  return CheckEgress(rule, *address);
}

}  // namespace gnomon::net
