#include "grammar/uri.h"

#include <optional>
#include <vector>

namespace deepinfer::grammar {
namespace {

struct Uri {
  std::optional<std::string> scheme, authority, query, fragment;
  std::string path;
};

Uri parse(std::string_view s) {
  Uri u;
  size_t i = 0;
  size_t colon = s.find_first_of(":/?#");
  if (colon != std::string_view::npos && s[colon] == ':' && colon > 0) {
    u.scheme = std::string(s.substr(0, colon));
    i = colon + 1;
  }
  if (s.substr(i, 2) == "//") {
    size_t end = s.find_first_of("/?#", i + 2);
    if (end == std::string_view::npos) end = s.size();
    u.authority = std::string(s.substr(i + 2, end - i - 2));
    i = end;
  }
  size_t end = s.find_first_of("?#", i);
  if (end == std::string_view::npos) end = s.size();
  u.path = std::string(s.substr(i, end - i));
  i = end;
  if (i < s.size() && s[i] == '?') {
    size_t e = s.find('#', i);
    if (e == std::string_view::npos) e = s.size();
    u.query = std::string(s.substr(i + 1, e - i - 1));
    i = e;
  }
  if (i < s.size() && s[i] == '#') u.fragment = std::string(s.substr(i + 1));
  return u;
}

std::string remove_dot_segments(std::string_view path) {
  std::vector<std::string> out;
  bool absolute = !path.empty() && path[0] == '/';
  size_t i = absolute ? 1 : 0;
  bool trailing = false;
  while (i <= path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view seg = path.substr(i, j - i);
    trailing = false;
    if (seg == ".") {
      trailing = true;
    } else if (seg == "..") {
      if (!out.empty()) out.pop_back();
      trailing = true;
    } else {
      out.emplace_back(seg);
    }
    i = j + 1;
  }
  std::string r = absolute ? "/" : "";
  for (size_t k = 0; k < out.size(); ++k) {
    if (k) r += "/";
    r += out[k];
  }
  if (trailing && !r.empty() && r.back() != '/') r += "/";
  return r;
}

std::string to_string(const Uri& u) {
  std::string s;
  if (u.scheme) s += *u.scheme + ":";
  if (u.authority) s += "//" + *u.authority;
  s += u.path;
  if (u.query) s += "?" + *u.query;
  if (u.fragment) s += "#" + *u.fragment;
  return s;
}

}  // namespace

std::string resolve_uri(std::string_view base_text, std::string_view ref_text) {
  Uri base = parse(base_text), ref = parse(ref_text), t;
  if (ref.scheme) {
    t = ref;
    t.path = remove_dot_segments(ref.path);
  } else {
    if (ref.authority) {
      t.authority = ref.authority;
      t.path = remove_dot_segments(ref.path);
      t.query = ref.query;
    } else {
      if (ref.path.empty()) {
        t.path = base.path;
        t.query = ref.query ? ref.query : base.query;
      } else {
        if (ref.path[0] == '/') {
          t.path = remove_dot_segments(ref.path);
        } else {
          std::string merged;
          if (base.authority && base.path.empty()) {
            merged = "/" + ref.path;
          } else {
            size_t slash = base.path.rfind('/');
            merged = (slash == std::string::npos ? "" : base.path.substr(0, slash + 1)) + ref.path;
          }
          t.path = remove_dot_segments(merged);
        }
        t.query = ref.query;
      }
      t.authority = base.authority;
    }
    t.scheme = base.scheme;
  }
  t.fragment = ref.fragment;
  return to_string(t);
}

std::pair<std::string, std::string> split_fragment(std::string_view uri) {
  size_t h = uri.find('#');
  if (h == std::string_view::npos) return {std::string(uri), ""};
  return {std::string(uri.substr(0, h)), std::string(uri.substr(h + 1))};
}

std::string percent_decode(std::string_view s) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      out += static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace deepinfer::grammar
