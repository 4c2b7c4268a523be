#include "grammar/json_formats.h"

#include "grammar/regex_parser.h"

#include <string>

namespace deepinfer::grammar {
namespace {

// Formats are written as ECMAScript patterns built from named pieces; parse() anchors them.
const std::string kDigit = "[0-9]";
const std::string kHex = "[0-9A-Fa-f]";

std::string date_pattern() {
  std::string div4 = "(?:[02468][048]|[13579][26])";
  std::string div4_not00 = "(?:0[48]|[2468][048]|[13579][26])";
  std::string leap = "(?:[0-9]{2}" + div4_not00 + "|" + div4 + "00)";
  std::string month_day =
      "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"
      "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
      "|02-(?:0[1-9]|1[0-9]|2[0-8]))";
  return "(?:[0-9]{4}-" + month_day + "|" + leap + "-02-29)";
}

std::string time_pattern() {
  // Leap seconds are refused: whether :60 is valid depends on the offset and the UTC date.
  return "(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]+)?(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9]))";
}

std::string ipv4_pattern() {
  std::string octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
  return "(?:" + octet + "(?:\\." + octet + "){3})";
}

std::string ipv6_pattern() {
  std::string h16 = kHex + "{1,4}";
  std::string ls32 = "(?:" + h16 + ":" + h16 + "|" + ipv4_pattern() + ")";
  auto rep = [&](int n) { return "(?:" + h16 + ":){" + std::to_string(n) + "}"; };
  auto upto = [&](int n) {  // [ *n( h16 ":" ) h16 ]
    return "(?:(?:" + h16 + ":){0," + std::to_string(n) + "}" + h16 + ")?";
  };
  return "(?:" + rep(6) + ls32 + "|::" + rep(5) + ls32 + "|" + upto(0) + "::" + rep(4) + ls32 + "|" + upto(1) + "::" +
         rep(3) + ls32 + "|" + upto(2) + "::" + rep(2) + ls32 + "|" + upto(3) + "::" + h16 + ":" + ls32 + "|" + upto(4) +
         "::" + ls32 + "|" + upto(5) + "::" + h16 + "|" + upto(6) + "::)";
}

std::string hostname_label() { return "(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)"; }

// RFC 1123 labels of 1..63 characters, without "--" in positions 3-4 (reserved for A-labels).
std::string hostname_ldh_label() {
  std::string a = "[A-Za-z0-9]", h = "[A-Za-z0-9-]";
  return "(?:" + a + "|" + a + a + "|" + a + h + a + "|" + a + h + h + a + "|" + a + h + "(?:" + a + h + "|-" + a + ")" + h +
         "{0,58}" + a + ")";
}

std::string email_pattern() {
  std::string atext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
  std::string dot_atom = atext + "+(?:\\." + atext + "+)*";
  std::string quoted = "\"(?:[\\x20\\x21\\x23-\\x5B\\x5D-\\x7E]|\\\\[\\x20-\\x7E])*\"";
  std::string domain = hostname_label() + "(?:\\." + hostname_label() + ")*";
  std::string literal = "\\[(?:" + ipv4_pattern() + "|IPv6:" + ipv6_pattern() + ")\\]";
  return "(?:(?:" + dot_atom + "|" + quoted + ")@(?:" + domain + "|" + literal + "))";
}

struct UriParts {
  std::string unreserved = "[A-Za-z0-9._~-]";
  std::string pct = "%" + kHex + "{2}";
  std::string sub = "[!$&'()*+,;=]";
  std::string pchar = "(?:" + unreserved + "|" + pct + "|" + sub + "|[:@])";
  std::string segment = pchar + "*";
  std::string segment_nz = pchar + "+";
  std::string segment_nz_nc = "(?:" + unreserved + "|" + pct + "|" + sub + "|@)+";
  std::string userinfo = "(?:" + unreserved + "|" + pct + "|" + sub + "|:)*";
  std::string ipvfuture = "v" + kHex + "+\\.(?:" + unreserved + "|" + sub + "|:)+";
  std::string host = "(?:\\[(?:" + ipv6_pattern() + "|" + ipvfuture + ")\\]|(?:" + unreserved + "|" + pct + "|" + sub + ")*)";
  std::string authority = "(?:" + userinfo + "@)?" + host + "(?::[0-9]*)?";
  std::string path_abempty = "(?:/" + segment + ")*";
  std::string path_absolute = "/(?:" + segment_nz + "(?:/" + segment + ")*)?";
  std::string path_rootless = segment_nz + "(?:/" + segment + ")*";
  std::string path_noscheme = segment_nz_nc + "(?:/" + segment + ")*";
  std::string query = "(?:" + pchar + "|[/?])*";
  std::string tail = "(?:\\?" + query + ")?(?:#" + query + ")?";
  std::string scheme = "[A-Za-z][A-Za-z0-9+.-]*";

  std::string uri() const {
    return "(?:" + scheme + ":(?://" + authority + path_abempty + "|" + path_absolute + "|" + path_rootless + ")?" + tail + ")";
  }
  std::string relative_ref() const {
    return "(?:(?://" + authority + path_abempty + "|" + path_absolute + "|" + path_noscheme + ")?" + tail + ")";
  }
};

std::string duration_pattern() {
  // RFC 3339 appendix A: a unit may only be followed by the next smaller one (Y then M then D,
  // H then M then S), weeks stand alone.
  std::string n = "[0-9]+";
  std::string time = "T(?:" + n + "H(?:" + n + "M(?:" + n + "S)?)?|" + n + "M(?:" + n + "S)?|" + n + "S)";
  std::string date = "(?:" + n + "Y(?:" + n + "M(?:" + n + "D)?)?|" + n + "M(?:" + n + "D)?|" + n + "D)";
  return "(?:P(?:" + date + "(?:" + time + ")?|" + time + "|" + n + "W))";
}

std::string json_pointer_pattern() { return "(?:(?:/(?:[^~/]|~[01])*)*)"; }

}  // namespace

Result<FormatRule> format_rule(std::string_view format) {
  FormatRule rule;
  auto number = [&](std::string_view lo, std::string_view hi, bool integer) -> Result<FormatRule> {
    rule.kind = FormatRule::Kind::kNumber;
    DI_TRY(a, Decimal::parse(lo));
    DI_TRY(b, Decimal::parse(hi));
    rule.minimum = a;
    rule.maximum = b;
    rule.integer = integer;
    return rule;
  };
  if (format == "int32") return number("-2147483648", "2147483647", true);
  if (format == "int64") return number("-9223372036854775808", "9223372036854775807", true);
  if (format == "uint32") return number("0", "4294967295", true);
  if (format == "uint64") return number("0", "18446744073709551615", true);
  if (format == "float") return number("-3.4028234663852886e38", "3.4028234663852886e38", false);
  if (format == "double") return number("-1.7976931348623157e308", "1.7976931348623157e308", false);
  std::string p;
  if (format == "date") {
    p = date_pattern();
  } else if (format == "time") {
    p = time_pattern();
  } else if (format == "date-time") {
    p = date_pattern() + "[Tt]" + time_pattern();
  } else if (format == "email") {
    p = email_pattern();
  } else if (format == "uuid") {
    p = kHex + "{8}-" + kHex + "{4}-" + kHex + "{4}-" + kHex + "{4}-" + kHex + "{12}";
  } else if (format == "ipv4") {
    p = ipv4_pattern();
  } else if (format == "ipv6") {
    p = ipv6_pattern();
  } else if (format == "uri") {
    p = UriParts().uri();
  } else if (format == "uri-reference") {
    UriParts u;
    p = "(?:" + u.uri() + "|" + u.relative_ref() + ")";
  } else if (format == "duration") {
    p = duration_pattern();
  } else if (format == "hostname") {
    p = hostname_ldh_label() + "(?:\\." + hostname_ldh_label() + ")*";
    rule.max_length = 253;
  } else if (format == "json-pointer") {
    p = json_pointer_pattern();
  } else if (format == "relative-json-pointer") {
    p = "(?:(?:0|[1-9][0-9]*)(?:#|" + json_pointer_pattern() + "))";
  } else if (format == "byte") {  // RFC 4648 base64, padded
    std::string b = "[A-Za-z0-9+/]";
    p = "(?:(?:" + b + "{4})*(?:" + b + "{2}==|" + b + "{3}=)?)";
  } else if (format == "regex") {
    // Regex syntax nests (groups, classes), so no automaton over the string can be exact: any
    // string, as 2020-12 treats a format by default (issue 30 asks for exactly this).
    return rule;
  } else if (format == "idn-email" || format == "idn-hostname" || format == "iri" || format == "iri-reference" ||
             format == "uri-template") {
    return make_error(Code::kGrammar, "json schema: format '{}' is not supported", format);
  } else {
    return rule;  // an annotation
  }
  rule.kind = FormatRule::Kind::kString;
  DI_TRY(r, parse_ecmascript_regex(p));
  rule.patterns.push_back(r);
  return rule;
}

}  // namespace deepinfer::grammar
