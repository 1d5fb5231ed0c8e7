// Parse Accel-Sim / GPGPU-Sim configuration files with gpgpu-sim's own option parser
// (src/option_parser.cc of the fetched source, compiled beside this file) and report what it
// read: every option registered as gpgpu-sim registers it (options.inc, generated from the
// source by extract_options.py), the files given as "-config FILE" arguments in order, as
// gpgpu-sim's and Accel-Sim's command lines pass them. Unknown options and unparsable values
// end the run as they end gpgpu-sim's (exit 1, its message on stderr).
//
// Output (stdout, JSON): "options": the final value of each option named after "--report"
// (as the parser's toString would print it); "scan": for the multi-value options, the values
// sscanf takes from them as gpgpu-sim's readers do (ptx_instruction::set_opcode_and_latency,
// shader_core_config::set_pipeline_latency, trace_config::parse_config,
// gpgpu_sim_config::init_clock_domains), null where the string ends first (a slot gpgpu-sim
// then reads from an uninitialised variable); "pipelines" and "stages": each unit's pipeline
// stages and each instruction class's start stage (latency - initiation interval).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "option_parser.h"

struct Registration {
  const char *name;
  enum option_dtype type;
  const char *def;
};

static const Registration kOptions[] = {
#include "options.inc"
};

union Storage {
  int i32;
  unsigned u32;
  long long i64;
  unsigned long long u64;
  bool b;
  float f;
  double d;
  char c;
  char *s;
};

static std::map<std::string, std::pair<const Registration *, Storage *>> g_opts;

static std::string json_str(const char *s) {
  if (!s) return "null";
  std::string out = "\"";
  for (const char *p = s; *p; ++p) {
    if (*p == '"' || *p == '\\') out += '\\';
    out += *p;
  }
  return out + "\"";
}

static std::string value_of(const std::string &name) {
  auto it = g_opts.find(name);
  if (it == g_opts.end()) return "null";
  const Registration *r = it->second.first;
  Storage *v = it->second.second;
  char buf[64];
  switch (r->type) {
    case OPT_INT32: snprintf(buf, sizeof buf, "%d", v->i32); return buf;
    case OPT_UINT32: snprintf(buf, sizeof buf, "%u", v->u32); return buf;
    case OPT_INT64: snprintf(buf, sizeof buf, "%lld", v->i64); return buf;
    case OPT_UINT64: snprintf(buf, sizeof buf, "%llu", v->u64); return buf;
    case OPT_BOOL: return v->b ? "true" : "false";
    case OPT_FLOAT: snprintf(buf, sizeof buf, "%g", v->f); return buf;
    case OPT_DOUBLE: snprintf(buf, sizeof buf, "%g", v->d); return buf;
    case OPT_CHAR: snprintf(buf, sizeof buf, "\"%c\"", v->c); return buf;
    case OPT_CSTR: return json_str(v->s);
  }
  return "null";
}

static const char *cstr(const char *name) {
  auto it = g_opts.find(name);
  if (it == g_opts.end() || it->second.first->type != OPT_CSTR) return nullptr;
  return it->second.second->s;
}

// sscanf("%u,%u,...") with n conversions, as gpgpu-sim reads these strings; slots it does not
// reach stay unset (-1 here; an uninitialised stack value in gpgpu-sim)
static std::vector<long> scan_uints(const char *name, int n) {
  std::vector<long> out(n, -1);
  const char *s = cstr(name);
  if (!s) return out;
  unsigned v[8] = {0};
  int got = 0;
  switch (n) {
    case 1: got = sscanf(s, "%u", &v[0]); break;
    case 2: got = sscanf(s, "%u,%u", &v[0], &v[1]); break;
    case 5: got = sscanf(s, "%u,%u,%u,%u,%u", &v[0], &v[1], &v[2], &v[3], &v[4]); break;
    case 6:
      got = sscanf(s, "%u,%u,%u,%u,%u,%u", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]);
      break;
    default: break;
  }
  for (int i = 0; i < got && i < n; ++i) out[i] = v[i];
  return out;
}

static std::string list_json(const std::vector<long> &xs) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i) {
    if (i) out += ", ";
    out += xs[i] < 0 ? "null" : std::to_string(xs[i]);
  }
  return out + "]";
}

struct Stage {
  std::string mode, op, unit;
  long lat, ii, depth;
};

static long max_or_unset(long a, long b) { return (a < 0 || b < 0) ? -1 : (a > b ? a : b); }

struct Read {
  std::map<std::string, std::vector<long>> lat, ii, trace;
  double clk[4] = {-1, -1, -1, -1};
  int nclk = 0;
};

static const char *kClasses[] = {"int", "fp", "dp"};
static const char *kTraceUnits[] = {"int", "sp", "dp", "sfu", "tensor"};

// what gpgpu-sim's readers take from the final option strings
static Read scan_all() {
  Read r;
  for (const char *c : kClasses) {
    int slots = std::strcmp(c, "int") == 0 ? 6 : 5;
    r.lat[c] = scan_uints(("-ptx_opcode_latency_" + std::string(c)).c_str(), slots);
    r.ii[c] = scan_uints(("-ptx_opcode_initiation_" + std::string(c)).c_str(), slots);
  }
  r.lat["sfu"] = scan_uints("-ptx_opcode_latency_sfu", 1);
  r.ii["sfu"] = scan_uints("-ptx_opcode_initiation_sfu", 1);
  r.lat["tensor"] = scan_uints("-ptx_opcode_latency_tesnor", 1);
  r.ii["tensor"] = scan_uints("-ptx_opcode_initiation_tensor", 1);
  for (const char *u : kTraceUnits)
    r.trace[u] = scan_uints(("-trace_opcode_latency_initiation_" + std::string(u)).c_str(), 2);
  if (const char *s = cstr("-gpgpu_clock_domains"))
    r.nclk = sscanf(s, "%lf:%lf:%lf:%lf", &r.clk[0], &r.clk[1], &r.clk[2], &r.clk[3]);
  return r;
}

static void print_scan(Read &r) {
  std::printf("  \"scan\": {\n");
  for (auto &kv : r.lat)
    std::printf("    \"latency_%s\": %s, \"initiation_%s\": %s,\n", kv.first.c_str(),
                list_json(kv.second).c_str(), kv.first.c_str(), list_json(r.ii[kv.first]).c_str());
  for (auto &kv : r.trace)
    std::printf("    \"trace_%s\": %s,\n", kv.first.c_str(), list_json(kv.second).c_str());
  std::printf("    \"clock_domains\": [");
  for (int k = 0; k < 4; ++k)
    k < r.nclk ? std::printf("%s%g", k ? ", " : "", r.clk[k])
               : std::printf("%snull", k ? ", " : "");
  std::printf("]\n  },\n");
}

// shader_core_config::set_pipeline_latency: the stages of each unit's pipeline
static std::map<std::string, long> pipelines(Read &r) {
  return {{"INT", max_or_unset(r.lat["int"][1], r.lat["int"][5])},
          {"SP", r.lat["fp"][1]},
          {"DP", r.lat["dp"][1]},
          {"SFU", max_or_unset(r.lat["dp"][4], r.lat["sfu"][0])},
          {"TENSOR", r.lat["tensor"][0]}};
}

// ptx_instruction::set_opcode_and_latency and the scheduler: the unit each class runs on;
// trace mode only where Accel-Sim's trace options are registered (its source was given)
static std::vector<Stage> stages_of(Read &r, std::map<std::string, long> &depth) {
  const char *slot_names[] = {"ADD", "MAX", "MUL", "MAD", "DIV", "SHFL"};
  const char *class_units[] = {"INT", "SP", "DP"};
  std::vector<Stage> out;
  for (int c = 0; c < 3; ++c) {
    const std::string cls = kClasses[c];
    for (int k = 0; k < (int)r.lat[cls].size(); ++k) {
      std::string unit = k == 4 ? "SFU" : class_units[c];
      out.push_back({"ptx", cls + " " + slot_names[k], unit, r.lat[cls][k], r.ii[cls][k],
                     depth[unit]});
    }
  }
  out.push_back({"ptx", "sfu", "SFU", r.lat["sfu"][0], r.ii["sfu"][0], depth["SFU"]});
  out.push_back({"ptx", "tensor", "TENSOR", r.lat["tensor"][0], r.ii["tensor"][0],
                 depth["TENSOR"]});
  const char *trace_units[] = {"INT", "SP", "DP", "SFU", "TENSOR"};
  bool traced = g_opts.count("-trace_opcode_latency_initiation_int") > 0;
  for (int u = 0; traced && u < 5; ++u)
    out.push_back({"trace", std::string("trace ") + kTraceUnits[u], trace_units[u],
                   r.trace[kTraceUnits[u]][0], r.trace[kTraceUnits[u]][1],
                   depth[trace_units[u]]});
  return out;
}

static std::string num_or_null(long v) { return v < 0 ? "null" : std::to_string(v); }

static void print_stages(const std::vector<Stage> &stages) {
  std::printf("  \"stages\": [");
  for (size_t k = 0; k < stages.size(); ++k) {
    const Stage &s = stages[k];
    bool known = s.lat >= 0 && s.ii >= 0 && s.depth >= 0;
    long start = s.lat - s.ii;
    std::printf("%s\n    {\"mode\": \"%s\", \"op\": \"%s\", \"unit\": \"%s\", "
                "\"latency\": %s, \"interval\": %s, \"stages\": %s, \"start\": %s, "
                "\"inside\": %s}",
                k ? "," : "", s.mode.c_str(), s.op.c_str(), s.unit.c_str(),
                num_or_null(s.lat).c_str(), num_or_null(s.ii).c_str(),
                num_or_null(s.depth).c_str(), known ? std::to_string(start).c_str() : "null",
                known && start >= 0 && start < s.depth ? "true" : "false");
  }
  std::printf("\n  ]\n}\n");
}

int main(int argc, char **argv) {
  option_parser_t opp = option_parser_create();
  const size_t n = sizeof kOptions / sizeof kOptions[0];
  std::vector<Storage> store(n);
  for (size_t i = 0; i < n; ++i) {
    std::memset(&store[i], 0, sizeof(Storage));
    option_parser_register(opp, kOptions[i].name, kOptions[i].type, &store[i], "",
                           kOptions[i].def);
    g_opts[kOptions[i].name] = {&kOptions[i], &store[i]};
  }
  std::vector<const char *> cmd = {"driver"};
  std::vector<std::string> report;
  int i = 1;
  for (; i < argc && std::strcmp(argv[i], "--report") != 0; ++i) cmd.push_back(argv[i]);
  for (++i; i < argc; ++i) report.push_back(argv[i]);
  option_parser_cmdline(opp, (int)cmd.size(), cmd.data());

  std::printf("{\n  \"registered\": %zu,\n  \"options\": {", n);
  for (size_t k = 0; k < report.size(); ++k)
    std::printf("%s\n    %s: %s", k ? "," : "", json_str(report[k].c_str()).c_str(),
                value_of(report[k]).c_str());
  std::printf("\n  },\n");
  Read r = scan_all();
  print_scan(r);
  std::map<std::string, long> depth = pipelines(r);
  std::printf("  \"pipelines\": {");
  bool first = true;
  for (auto &kv : depth) {
    std::printf("%s\"%s\": %s", first ? "" : ", ", kv.first.c_str(),
                num_or_null(kv.second).c_str());
    first = false;
  }
  std::printf("},\n");
  print_stages(stages_of(r, depth));
  option_parser_destroy(opp);
  return 0;
}
