#include "queue/pg/pg_location.h"

#include <libpq-fe.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

namespace wizq {
namespace {

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

bool IContains(std::string_view text, std::string_view part) {
  if (part.size() > text.size()) return false;
  for (size_t i = 0; i + part.size() <= text.size(); i++) {
    if (IEquals(text.substr(i, part.size()), part)) return true;
  }
  return false;
}

// Keywords whose value is a secret.
bool IsSecretKey(std::string_view key) {
  return IEquals(key, "password") || IEquals(key, "sslpassword");
}

// Length of the URL scheme ("postgresql://", "postgres://"), or 0. libpq
// wants them in lower case; any case is taken here, to hide more.
size_t SchemeLength(std::string_view location) {
  for (std::string_view scheme : {"postgresql://", "postgres://"}) {
    if (location.size() >= scheme.size() &&
        IEquals(location.substr(0, scheme.size()), scheme)) {
      return scheme.size();
    }
  }
  return 0;
}

// Percent-decodes `s` (as libpq does URL parts); false if malformed.
bool PercentDecode(std::string_view s, std::string* out) {
  out->clear();
  for (size_t i = 0; i < s.size(); i++) {
    if (s[i] != '%') {
      out->push_back(s[i]);
      continue;
    }
    if (i + 2 >= s.size()) return false;
    const char hex[3] = {s[i + 1], s[i + 2], '\0'};
    if (!std::isxdigit(static_cast<unsigned char>(hex[0])) ||
        !std::isxdigit(static_cast<unsigned char>(hex[1]))) {
      return false;
    }
    out->push_back(static_cast<char>(std::strtol(hex, nullptr, 16)));
    i += 2;
  }
  return true;
}

// A part of the location to hide: [begin, end), or to the end if end is
// npos; `whole` is where the secret's own text starts (its keyword, or the
// ':' before a URL's password): [whole, end) is what leaving it out
// removes.
struct Span {
  size_t begin;
  size_t end;
  size_t whole;
};

// The password spans of the query from `from` (the '?' at or after it).
void QuerySecretSpans(std::string_view url, size_t from,
                      std::vector<Span>* spans) {
  size_t q = url.find('?', from);
  while (q != std::string_view::npos) {
    const size_t begin = q + 1;
    const size_t amp = url.find('&', begin);
    const size_t end = amp == std::string_view::npos ? url.size() : amp;
    const std::string_view param = url.substr(begin, end - begin);
    const size_t eq = param.find('=');
    std::string key;
    const std::string_view raw_key = param.substr(0, eq);
    if (!PercentDecode(raw_key, &key)) key = std::string(raw_key);
    if (IsSecretKey(key)) {
      spans->push_back(
          {eq == std::string_view::npos ? begin : begin + eq + 1, end, begin});
    }
    q = amp;
  }
}

// The secret spans of a URL as it reads with its user info ending at `at`
// (npos: none): the password there and the values of the query's password
// parameters after it.
std::vector<Span> UrlSpansWithUserInfoAt(std::string_view url,
                                         size_t scheme_len, size_t at) {
  std::vector<Span> spans;
  size_t query_from = scheme_len;
  if (at != std::string_view::npos && at >= scheme_len) {
    const size_t colon = url.find(':', scheme_len);
    if (colon < at) spans.push_back({colon + 1, at, colon});
    query_from = at + 1;
  }
  QuerySecretSpans(url, query_from, &spans);
  return spans;
}

// libpq's reading: the user info ends at the first '@' met before a '/'.
size_t LibpqUserInfoEnd(std::string_view url, size_t scheme_len) {
  const size_t stop = url.find_first_of("@/", scheme_len);
  return stop != std::string_view::npos && url[stop] == '@'
             ? stop
             : std::string_view::npos;
}

bool SameSpans(const std::vector<Span>& a, const std::vector<Span>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++) {
    if (a[i].begin != b[i].begin || a[i].end != b[i].end) return false;
  }
  return true;
}

// The secret spans of a URL: the password of its user info and the values
// of its password parameters. Read twice: as libpq reads it, and with the
// user info ending at the LAST '@' (a password with an unencoded '/', '?'
// or '@' is then still hidden); where the readings differ (an '@' in a
// query value, a password libpq would cut short), both readings' spans are
// hidden, merged: more than the password may be hidden, never less.
std::vector<Span> UrlSecretSpans(std::string_view url, size_t scheme_len,
                                 bool* agree = nullptr) {
  const std::vector<Span> last =
      UrlSpansWithUserInfoAt(url, scheme_len, url.rfind('@'));
  const std::vector<Span> libpq = UrlSpansWithUserInfoAt(
      url, scheme_len, LibpqUserInfoEnd(url, scheme_len));
  if (agree != nullptr) *agree = SameSpans(last, libpq);
  if (SameSpans(last, libpq)) return last;
  std::vector<Span> all = last;
  all.insert(all.end(), libpq.begin(), libpq.end());
  std::sort(all.begin(), all.end(),
            [](const Span& x, const Span& y) { return x.begin < y.begin; });
  std::vector<Span> merged;
  for (const Span& sp : all) {
    if (!merged.empty() && sp.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, sp.end);
      merged.back().whole = std::min(merged.back().whole, sp.whole);
    } else {
      merged.push_back(sp);
    }
  }
  return merged;
}

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)); }

// The secret spans of a keyword string, read as libpq's conninfo_parse
// reads it (values quoted with '...' or not, backslash escapes). When the
// string cannot be read and a password may be in the unread rest, the rest
// is one span to the end: libpq's reading of a malformed value is not the
// user's intent ("password=se cret" is "se", then a keyword "cret").
std::vector<Span> KeywordSecretSpans(std::string_view s) {
  std::vector<Span> spans;
  bool secret_seen = false;
  size_t i = 0;
  auto fail = [&](size_t from) {
    if (secret_seen || IContains(s.substr(from), "password")) {
      spans.push_back({from, std::string_view::npos, from});
    }
    return spans;
  };
  while (true) {
    while (i < s.size() && IsSpace(s[i])) i++;
    if (i >= s.size()) return spans;
    const size_t key_begin = i;
    while (i < s.size() && !IsSpace(s[i]) && s[i] != '=') i++;
    const std::string_view key = s.substr(key_begin, i - key_begin);
    while (i < s.size() && IsSpace(s[i])) i++;
    if (i >= s.size() || s[i] != '=') return fail(key_begin);
    i++;
    while (i < s.size() && IsSpace(s[i])) i++;
    const size_t value_begin = i;
    const bool quoted = i < s.size() && s[i] == '\'';
    if (quoted) i++;
    bool closed = !quoted;
    while (i < s.size()) {
      if (s[i] == '\\') {
        i += 2;
        continue;
      }
      if (quoted && s[i] == '\'') {
        i++;
        closed = true;
        break;
      }
      if (!quoted && IsSpace(s[i])) break;
      i++;
    }
    i = std::min(i, s.size());
    if (IsSecretKey(key)) {
      secret_seen = true;
      spans.push_back({value_begin, i, key_begin});  // to the end if open
    }
    if (!closed && !IsSecretKey(key)) return fail(value_begin);
  }
}

std::vector<Span> SecretSpans(std::string_view location) {
  const size_t scheme = SchemeLength(location);
  return scheme > 0 ? UrlSecretSpans(location, scheme)
                    : KeywordSecretSpans(location);
}

// The value libpq reads from a keyword string's raw value: quotes removed,
// backslash escapes resolved.
std::string UnquoteKeywordValue(std::string_view raw) {
  if (!raw.empty() && raw.front() == '\'') raw.remove_prefix(1);
  if (!raw.empty() && raw.back() == '\'') raw.remove_suffix(1);
  std::string out;
  for (size_t i = 0; i < raw.size(); i++) {
    if (raw[i] == '\\' && i + 1 < raw.size()) i++;
    out.push_back(raw[i]);
  }
  return out;
}

void AddSecret(std::vector<std::string>* secrets, std::string s) {
  if (s.empty()) return;
  if (std::find(secrets->begin(), secrets->end(), s) != secrets->end()) {
    return;
  }
  secrets->push_back(std::move(s));
}

// Calls f(keyword, value) for each option libpq reads from `location`;
// false if it cannot parse it.
template <typename F>
bool ForEachLibpqOption(std::string_view location, F f) {
  const std::string copy(location);
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(copy.c_str(), &error);
  if (error != nullptr) PQfreemem(error);
  if (options == nullptr) return false;
  for (PQconninfoOption* o = options; o->keyword != nullptr; o++) {
    if (o->val != nullptr) f(std::string_view(o->keyword), o->val);
  }
  PQconninfoFree(options);
  return true;
}

}  // namespace

std::string RedactPgLocation(std::string_view location) {
  std::string out;
  size_t from = 0;
  for (const Span& span : SecretSpans(location)) {
    out.append(location.substr(from, span.begin - from));
    out.append(kPgRedacted);
    if (span.end == std::string_view::npos) return out;
    from = span.end;
  }
  out.append(location.substr(from));
  return out;
}

// Each span's [whole, end) removed, last first; a URL's query parameter
// with the '&' after it (or, the last one, the '?' or '&' before it), a
// keyword with the spaces after it.
std::string PgLocationWithoutPassword(std::string_view location) {
  const std::vector<Span> spans = SecretSpans(location);
  const bool parsed = ForEachLibpqOption(location, [](auto, auto) {});
  bool agree = true;
  const size_t scheme = SchemeLength(location);
  if (scheme > 0) UrlSecretSpans(location, scheme, &agree);
  // Where the readings of a URL differ, what to remove is not sure.
  if (!agree) return RedactPgLocation(location);
  for (const Span& span : spans) {
    if (!parsed || span.end == std::string_view::npos) {
      return RedactPgLocation(location);  // it will not run anyway
    }
  }
  std::string out(location);
  const bool url = SchemeLength(location) > 0;
  for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
    size_t from = it->whole, to = it->end;
    if (url && location[from] != ':') {  // a query parameter
      if (to < out.size() && out[to] == '&') {
        to++;
      } else {
        from--;
      }
    } else if (!url) {
      while (to < out.size() && IsSpace(out[to])) to++;
    }
    out.erase(from, to - from);
  }
  if (!url) {
    while (!out.empty() && IsSpace(out.back())) out.pop_back();
  }
  // Nothing left would name no store (the directory store's "").
  return out.empty() ? RedactPgLocation(location) : out;
}

bool PgLocationHasPassword(std::string_view location) {
  bool found = false;
  const bool parsed =
      ForEachLibpqOption(location, [&](std::string_view key, const char* v) {
        if (IsSecretKey(key) && *v != '\0') found = true;
      });
  if (parsed) return found;
  return RedactPgLocation(location) != location;
}

std::string PgPasswordWarning(std::string_view option) {
  std::string w = "warning: a password is written in ";
  w += option;
  w += ", where every user of this machine can read it (ps); give it in a "
       "password file (PGPASSFILE, ~/.pgpass), a service file "
       "(PGSERVICEFILE) or the PGPASSWORD environment variable instead";
  return w;
}

std::vector<std::string> PgLocationSecrets(std::string_view location) {
  std::vector<std::string> secrets;
  const bool url = SchemeLength(location) > 0;
  for (const Span& span : SecretSpans(location)) {
    const std::string_view value =
        span.end == std::string_view::npos
            ? location.substr(span.begin)
            : location.substr(span.begin, span.end - span.begin);
    AddSecret(&secrets, std::string(value));
    std::string decoded;
    if (url) {
      if (PercentDecode(value, &decoded)) AddSecret(&secrets, decoded);
    } else {
      AddSecret(&secrets, UnquoteKeywordValue(value));
    }
    if (!url && span.end == std::string_view::npos) {
      // The unreadable rest of a keyword string: libpq's message quotes
      // the word it stopped at ("missing "=" after "cret"").
      size_t i = 0;
      while (i < value.size()) {
        while (i < value.size() && IsSpace(value[i])) i++;
        const size_t begin = i;
        while (i < value.size() && !IsSpace(value[i])) i++;
        AddSecret(&secrets, std::string(value.substr(begin, i - begin)));
      }
    }
  }
  ForEachLibpqOption(location, [&](std::string_view key, const char* v) {
    if (IsSecretKey(key)) AddSecret(&secrets, v);
  });
  if (const char* env = std::getenv("PGPASSWORD")) AddSecret(&secrets, env);
  return secrets;
}

std::string ScrubPgSecrets(std::string text,
                           const std::vector<std::string>& secrets) {
  std::vector<const std::string*> longest_first;
  for (const std::string& s : secrets) {
    if (!s.empty()) longest_first.push_back(&s);
  }
  std::sort(longest_first.begin(), longest_first.end(),
            [](const std::string* a, const std::string* b) {
              return a->size() > b->size();
            });
  for (const std::string* secret : longest_first) {
    size_t pos = 0;
    while ((pos = text.find(*secret, pos)) != std::string::npos) {
      text.replace(pos, secret->size(), kPgRedacted);
      pos += kPgRedacted.size();
    }
  }
  return text;
}

}  // namespace wizq
