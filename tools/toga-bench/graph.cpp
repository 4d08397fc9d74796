// Graph loader: see graph.hpp for the formats, the normalisation and the errors.
#include "graph.hpp"

#include <sys/stat.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <string_view>
#include <vector>

namespace toga::bench {

namespace {

using u32 = std::uint32_t;
using u64 = std::uint64_t;

// Ids are stored as u32, so at most 2^32 nodes (ids 0..2^32-1); graph_limits may ask for less.
constexpr u64 kMaxNodes = u64{1} << 32;

std::string make_message(const std::string& file, std::size_t line, const std::string& what) {
  std::string m = file;
  if (line != 0) m += ':' + std::to_string(line);
  m += ": ";
  m += what;
  return m;
}

// `text` quoted for an error message: escapes for quotes, backslashes and control bytes (so a
// stray \r or a TAB separator is visible), cut after 80 bytes.
std::string quoted(std::string_view text) {
  constexpr std::size_t kMax = 80;
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  if (text.size() > kMax) out += "...";
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

bool iends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && iequals(s.substr(s.size() - suffix.size()), suffix);
}

std::string limit_text(std::uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  unsigned u = 0;
  std::uint64_t b = bytes;
  while (u < 4 && b >= 1024 && b % 1024 == 0) {
    b /= 1024;
    ++u;
  }
  return std::to_string(b) + " " + units[u];
}

const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "a special file";
}

// The whole file, at most limits.max_bytes of it: a regular file is measured before it is read;
// a pipe is read in pieces until the limit; devices, directories and sockets are refused (an
// endless /dev/zero would otherwise fill the memory).
std::string read_file(const std::string& path, const graph_limits& limits) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!f) {
    throw graph_error(path, 0, std::string("expected a readable file, found an error on open (") +
                                   std::strerror(errno) + ")");
  }
  struct stat st {};
  if (::fstat(::fileno(f.get()), &st) != 0) {
    throw graph_error(path, 0, std::string("expected a readable file, found an error on fstat (") +
                                   std::strerror(errno) + ")");
  }
  const bool regular = S_ISREG(st.st_mode);
  if (!regular && !S_ISFIFO(st.st_mode)) {
    throw graph_error(path, 0, std::string("expected a regular file or a pipe, found ") + file_kind(st.st_mode));
  }
  const std::string too_big = "expected at most " + limit_text(limits.max_bytes) +
                              " of graph file (toga-bench's limit on input bytes, graph_limits::max_bytes), found ";
  if (regular && static_cast<std::uint64_t>(st.st_size) > limits.max_bytes) {
    throw graph_error(path, 0, too_big + std::to_string(st.st_size) + " bytes");
  }
  std::string data;
  if (regular) data.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(buf, 1, sizeof buf, f.get());
    if (data.size() + n > limits.max_bytes) throw graph_error(path, 0, too_big + "more (read from a pipe)");
    data.append(buf, n);
    if (n < sizeof buf) break;
  }
  if (std::ferror(f.get())) {
    throw graph_error(path, 0, std::string("expected a readable file, found a read error (") +
                                   std::strerror(errno) + ")");
  }
  return data;
}

bool is_gzip(std::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
         static_cast<unsigned char>(data[1]) == 0x8b;
}

// Inflates `in` (one or more concatenated gzip members) and hands the output to
// `out(const char* data, std::size_t n)` in pieces of at most 256 KiB. Throws graph_error for
// corrupt, truncated or trailing data, at the line where the decompressed data stops.
template <class Out>
void inflate_gzip(const std::string& path, std::string_view in, Out&& out) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) throw std::bad_alloc();
  struct guard {
    z_stream* z;
    ~guard() { inflateEnd(z); }
  } g{&zs};

  std::vector<char> buf(std::size_t{1} << 18);
  std::uint64_t produced = 0;
  std::uint64_t newlines = 0;
  auto line = [&] { return static_cast<std::size_t>(newlines + 1); };
  std::size_t consumed = 0;  // input bytes handed to zlib
  for (;;) {
    if (zs.avail_in == 0 && consumed < in.size()) {
      const std::size_t chunk = std::min<std::size_t>(in.size() - consumed, 1u << 30);
      zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + consumed));
      zs.avail_in = static_cast<uInt>(chunk);
      consumed += chunk;
    }
    zs.next_out = reinterpret_cast<Bytef*>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    const uInt avail_in_before = zs.avail_in;
    const int rc = inflate(&zs, Z_NO_FLUSH);
    const std::size_t n = buf.size() - zs.avail_out;
    if (n != 0) {
      newlines += static_cast<std::uint64_t>(std::count(buf.data(), buf.data() + n, '\n'));
      produced += n;
      out(buf.data(), n);
    }
    const std::size_t in_left = zs.avail_in + (in.size() - consumed);
    if (rc == Z_STREAM_END) {
      if (in_left == 0) return;
      // Another member follows (gzip allows concatenated members): continue with it.
      const std::string_view rest = in.substr(in.size() - in_left);
      if (!is_gzip(rest)) {
        throw graph_error(path, line(),
                          "expected end of file or another gzip member after the gzip stream, "
                          "found " + std::to_string(in_left) + " bytes of other data");
      }
      inflateReset(&zs);
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && in_left == 0) {
      throw graph_error(path, line(),
                        "expected the rest of the gzip stream, found end of file (truncated "
                        "after " + std::to_string(in.size()) + " compressed bytes, " +
                            std::to_string(produced) + " bytes decompressed)");
    }
    // No progress with a whole empty buffer and input left cannot happen with valid data.
    if (rc == Z_BUF_ERROR && (n != 0 || zs.avail_in != avail_in_before)) continue;
    if (rc == Z_MEM_ERROR) throw std::bad_alloc();
    throw graph_error(path, line(),
                      std::string("expected valid gzip data, found corrupt data (zlib: ") +
                          (zs.msg != nullptr ? zs.msg : "error " + std::to_string(rc)) + ")");
  }
}

// Decompresses in two passes: the first only counts (and finds every error), so that a small
// file that inflates to gigabytes is refused before any memory is taken for its text; the
// second writes into a buffer of exactly the right size.
std::string gunzip(const std::string& path, std::string_view in, const graph_limits& limits) {
  std::uint64_t total = 0;
  inflate_gzip(path, in, [&](const char*, std::size_t n) {
    total += n;
    if (total > limits.max_bytes) {
      throw graph_error(path, 0, "expected at most " + limit_text(limits.max_bytes) +
                                     " of decompressed graph text (toga-bench's limit on input bytes, "
                                     "graph_limits::max_bytes), found more: the gzip data inflates beyond it");
    }
  });
  std::string text;
  text.reserve(static_cast<std::size_t>(total));
  inflate_gzip(path, in, [&](const char* p, std::size_t n) { text.append(p, n); });
  return text;
}

// Reads the buffer line by line: the line's text without the LF and without one trailing CR.
class line_reader {
 public:
  explicit line_reader(std::string_view text) : text_(text) {
    if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;  // UTF-8 byte-order mark
  }
  bool next(std::string_view& line) {
    if (pos_ >= text_.size()) return false;
    const char* begin = text_.data() + pos_;
    const void* nl = std::memchr(begin, '\n', text_.size() - pos_);
    std::size_t len = nl != nullptr ? static_cast<std::size_t>(static_cast<const char*>(nl) - begin)
                                    : text_.size() - pos_;
    pos_ += len + (nl != nullptr ? 1 : 0);
    if (len > 0 && begin[len - 1] == '\r') --len;
    line = std::string_view(begin, len);
    ++number_;
    return true;
  }
  std::size_t number() const { return number_; }  // of the line last returned (0 before)

 private:
  std::string_view text_;
  std::size_t pos_ = 0;
  std::size_t number_ = 0;
};

bool is_space(char c) { return c == ' ' || c == '\t'; }

// Splits a line into whitespace-separated fields, at most `max` of them; returns how many fields
// the line has, counting all of them (so a count above `max` means extra fields).
std::size_t split(std::string_view line, std::string_view* fields, std::size_t max) {
  std::size_t count = 0;
  std::size_t i = 0;
  for (;;) {
    while (i < line.size() && is_space(line[i])) ++i;
    if (i == line.size()) return count;
    const std::size_t start = i;
    while (i < line.size() && !is_space(line[i])) ++i;
    if (count < max) fields[count] = line.substr(start, i - start);
    ++count;
  }
}

bool is_blank(std::string_view line) {
  return std::all_of(line.begin(), line.end(), is_space);
}

// Parses the whole field as an unsigned decimal integer (digits only).
enum class num { ok, bad, overflow };
num parse_u64(std::string_view s, u64& v) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return num::bad;  // from_chars would accept nothing else anyway
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec == std::errc::result_out_of_range) return num::overflow;
  if (ec != std::errc() || p != s.data() + s.size()) return num::bad;
  return num::ok;
}

bool is_integer(std::string_view s) {
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) s.remove_prefix(1);
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool is_real(std::string_view s) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  double d = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), d);
  // Out-of-range values (1e999) are still numbers for our purpose: only the pattern is used.
  return (ec == std::errc() || ec == std::errc::result_out_of_range) && p == s.data() + s.size();
}

// Turns undirected pairs packed as (min << 32 | max) into the sorted, duplicate-free edge list.
std::vector<std::pair<u32, u32>> finish_edges(std::vector<u64>& keys) {
  if (!std::is_sorted(keys.begin(), keys.end())) std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  std::vector<std::pair<u32, u32>> edges;
  edges.reserve(keys.size());
  for (const u64 k : keys) edges.emplace_back(static_cast<u32>(k >> 32), static_cast<u32>(k));
  return edges;
}

inline u64 edge_key(u64 a, u64 b) { return a < b ? (a << 32 | b) : (b << 32 | a); }

void parse_snap(const std::string& path, std::string_view text, graph& g, const graph_limits& limits) {
  line_reader lines(text);
  std::string_view line;
  std::string_view f[2];
  std::vector<u64> ids;  // two per edge line, as written in the file
  ids.reserve(static_cast<std::size_t>(std::min<u64>(text.size() / 4, 2 * limits.max_entries)));
  u64 max_id = 0;
  while (lines.next(line)) {
    std::size_t i = 0;
    while (i < line.size() && is_space(line[i])) ++i;
    if (i == line.size() || line[i] == '#') continue;
    if (ids.size() / 2 == limits.max_entries) {
      throw graph_error(path, lines.number(),
                        "expected at most " + std::to_string(limits.max_entries) +
                            " edge lines (toga-bench's limit, graph_limits::max_entries), found more");
    }
    u64 u = 0;
    u64 v = 0;
    const std::size_t n = split(line, f, 2);
    num ru = num::bad;
    num rv = num::bad;
    if (n == 2) {
      ru = parse_u64(f[0], u);
      rv = parse_u64(f[1], v);
    }
    if (ru != num::ok || rv != num::ok) {
      const bool overflow = (ru == num::overflow && rv != num::bad) || (rv == num::overflow && ru != num::bad);
      throw graph_error(path, lines.number(),
                        std::string(overflow ? "expected node ids below 2^64" : "expected two node ids") +
                            ", found " + quoted(line));
    }
    ids.push_back(u);
    ids.push_back(v);
    max_id = std::max({max_id, u, v});
  }
  if (ids.empty()) {
    throw graph_error(path, lines.number() + 1,
                      "expected at least one edge line \"u v\", found end of file");
  }

  // Compact the ids, keeping their order: id -> number of distinct smaller ids.
  std::vector<u64> keys;
  keys.reserve(ids.size() / 2);
  if (max_id < kMaxNodes && max_id <= 2 * ids.size() + 1024) {
    // Dense enough for a table indexed by id.
    std::vector<u32> rank(max_id + 1, 0);
    for (const u64 id : ids) rank[id] = 1;
    u64 distinct = 0;
    for (u32& r : rank) {
      const u32 present = r;
      r = static_cast<u32>(distinct);
      distinct += present;
    }
    g.nodes = distinct;
    if (distinct > limits.max_vertices) {
      throw graph_error(path, 0, "expected at most " + std::to_string(limits.max_vertices) +
                                     " distinct node ids (toga-bench's limit on vertices, graph_limits::max_vertices), found " +
                                     std::to_string(distinct));
    }
    for (std::size_t i = 0; i < ids.size(); i += 2) {
      if (ids[i] != ids[i + 1]) keys.push_back(edge_key(rank[ids[i]], rank[ids[i + 1]]));
    }
  } else {
    std::vector<u64> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
    if (sorted.size() > std::min(kMaxNodes, limits.max_vertices)) {
      throw graph_error(path, 0, "expected at most " + std::to_string(std::min(kMaxNodes, limits.max_vertices)) +
                                     " distinct node ids (toga-bench's limit on vertices, graph_limits::max_vertices), found " +
                                     std::to_string(sorted.size()));
    }
    g.nodes = sorted.size();
    auto rank = [&](u64 id) {
      return static_cast<u64>(std::lower_bound(sorted.begin(), sorted.end(), id) - sorted.begin());
    };
    for (std::size_t i = 0; i < ids.size(); i += 2) {
      if (ids[i] != ids[i + 1]) keys.push_back(edge_key(rank(ids[i]), rank(ids[i + 1])));
    }
  }
  std::vector<u64>().swap(ids);
  g.edges = finish_edges(keys);
}

void parse_mtx(const std::string& path, std::string_view text, graph& g, const graph_limits& limits) {
  line_reader lines(text);
  std::string_view line;

  // Banner: %%MatrixMarket matrix coordinate FIELD SYMMETRY
  constexpr const char* kBanner = "\"%%MatrixMarket matrix coordinate FIELD SYMMETRY\"";
  if (!lines.next(line)) {
    throw graph_error(path, 1, std::string("expected the banner ") + kBanner + ", found end of file");
  }
  std::string_view b[6];
  const std::size_t nb = split(line, b, 6);
  if (nb == 0 || b[0] != "%%MatrixMarket") {
    throw graph_error(path, 1, std::string("expected the banner ") + kBanner + ", found " + quoted(line));
  }
  if (nb != 5) {
    throw graph_error(path, 1, std::string("expected the banner ") + kBanner + " (5 words), found " +
                                   std::to_string(nb) + " words: " + quoted(line));
  }
  if (!iequals(b[1], "matrix") || !iequals(b[2], "coordinate")) {
    throw graph_error(path, 1, "expected \"matrix coordinate\" after %%MatrixMarket (sparse format), found " +
                                   quoted(std::string(b[1]) + " " + std::string(b[2])));
  }
  enum class field { pattern, real, integer } fld;
  if (iequals(b[3], "pattern")) {
    fld = field::pattern;
  } else if (iequals(b[3], "real")) {
    fld = field::real;
  } else if (iequals(b[3], "integer")) {
    fld = field::integer;
  } else {
    throw graph_error(path, 1, "expected field pattern, real or integer, found " + quoted(b[3]));
  }
  if (!iequals(b[4], "general") && !iequals(b[4], "symmetric")) {
    throw graph_error(path, 1, "expected symmetry general or symmetric, found " + quoted(b[4]));
  }

  // Comments, then the size line.
  const char* kSize = "the size line \"nrows ncols nnz\"";
  std::string_view s[3];
  for (;;) {
    if (!lines.next(line)) {
      throw graph_error(path, lines.number() + 1, std::string("expected ") + kSize + ", found end of file");
    }
    if (!line.empty() && line[0] == '%') continue;
    if (is_blank(line)) continue;
    break;
  }
  const std::size_t size_line = lines.number();
  u64 rows = 0;
  u64 cols = 0;
  u64 nnz = 0;
  if (split(line, s, 3) != 3 || parse_u64(s[0], rows) != num::ok || parse_u64(s[1], cols) != num::ok ||
      parse_u64(s[2], nnz) != num::ok) {
    throw graph_error(path, size_line, std::string("expected ") + kSize + " (three non-negative integers), found " +
                                           quoted(line));
  }
  if (rows != cols) {
    throw graph_error(path, size_line,
                      "expected a square matrix (nrows == ncols) for a graph, found " + quoted(line));
  }
  if (rows > kMaxNodes) {
    throw graph_error(path, size_line,
                      "expected at most 2^32 rows (32-bit node ids), found " + quoted(line));
  }
  if (rows > limits.max_vertices) {
    throw graph_error(path, size_line,
                      "expected at most " + std::to_string(limits.max_vertices) +
                          " rows (toga-bench's limit on vertices, graph_limits::max_vertices), found " + quoted(line));
  }
  if (nnz > limits.max_entries) {
    throw graph_error(path, size_line,
                      "expected at most " + std::to_string(limits.max_entries) +
                          " entries (toga-bench's limit, graph_limits::max_entries), found " + quoted(line));
  }
  g.nodes = rows;

  const std::size_t want_fields = fld == field::pattern ? 2 : 3;
  const char* entry_form = fld == field::pattern ? "\"i j\"" : "\"i j value\"";
  const std::string count_note =
      std::to_string(nnz) + " entries (size line, line " + std::to_string(size_line) + ")";
  std::vector<u64> keys;
  keys.reserve(static_cast<std::size_t>(std::min<u64>(nnz, text.size() / 4 + 1)));
  u64 entries = 0;
  std::string_view f[3];
  while (lines.next(line)) {
    if (!line.empty() && line[0] == '%') continue;
    if (is_blank(line)) continue;
    if (entries == nnz) {
      throw graph_error(path, lines.number(),
                        "expected " + count_note + ", found another entry " + quoted(line));
    }
    u64 i = 0;
    u64 j = 0;
    const std::size_t n = split(line, f, 3);
    if (n != want_fields || parse_u64(f[0], i) != num::ok || parse_u64(f[1], j) != num::ok ||
        (fld == field::integer && !is_integer(f[2])) || (fld == field::real && !is_real(f[2]))) {
      throw graph_error(path, lines.number(),
                        "expected entry " + std::to_string(entries + 1) + " of " + std::to_string(nnz) +
                            " as " + entry_form + ", found " + quoted(line));
    }
    if (i < 1 || i > rows || j < 1 || j > rows) {
      throw graph_error(path, lines.number(),
                        "expected node ids in 1.." + std::to_string(rows) + ", found " + quoted(line));
    }
    ++entries;
    if (i != j) keys.push_back(edge_key(i - 1, j - 1));
  }
  if (entries != nnz) {
    throw graph_error(path, lines.number() + 1,
                      "expected " + count_note + ", found end of file after " + std::to_string(entries));
  }
  g.edges = finish_edges(keys);
}

std::string base_name(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (iends_with(name, ".gz")) name.resize(name.size() - 3);
  if (iends_with(name, ".mtx") || iends_with(name, ".txt")) name.resize(name.size() - 4);
  return name;
}

}  // namespace

graph_error::graph_error(const std::string& file, std::size_t line, const std::string& what)
    : std::runtime_error(make_message(file, line, what)), file_(file), line_(line) {}

graph load_graph(const std::string& path, const graph_limits& limits) {
  std::string data = read_file(path, limits);
  if (is_gzip(data)) data = gunzip(path, data, limits);

  std::string_view plain = path;
  if (iends_with(plain, ".gz")) plain.remove_suffix(3);
  bool mtx = false;
  if (iends_with(plain, ".mtx")) {
    mtx = true;
  } else if (iends_with(plain, ".txt")) {
    mtx = false;
  } else {
    std::string_view text = data;
    if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
    mtx = text.substr(0, 14) == "%%MatrixMarket";
  }

  graph g;
  g.name = base_name(path);
  if (mtx) {
    parse_mtx(path, data, g, limits);
  } else {
    parse_snap(path, data, g, limits);
  }
  return g;
}

std::vector<std::uint32_t> degrees(const graph& g) {
  std::vector<std::uint32_t> d(static_cast<std::size_t>(g.nodes), 0);
  for (const auto& [u, v] : g.edges) {
    ++d[u];
    ++d[v];
  }
  return d;
}

}  // namespace toga::bench
