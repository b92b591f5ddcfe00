// Issue 39, kept fixed: --comm-rules patterns match in time about linear in
// the kernel name (a 4,096-character rule against a 1 MiB name took 7 s),
// with the same answers as before; a rule file may start with a UTF-8
// byte-order mark and end its lines in CR LF; a Kineto CPU range skipped for
// a bad time is a counted bad record like a GPU activity, and a skipped
// iteration marker (ProfilerStep#N) is named in the diagnostics.
#include "ImportFixture.h"
#include "TestSupport.h"
#include "analysis/Analysis.h"
#include "analysis/CommRules.h"
#include "util/Error.h"

#include <QFile>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>

using namespace pipescope;
using namespace pipescope::test;

namespace {

void writeFile(const std::string& path, const std::string& contents)
{
    QFile f(QString::fromStdString(path));
    if (!f.open(QIODevice::WriteOnly))
        qFatal("cannot write %s", path.c_str());
    f.write(contents.data(), static_cast<qint64>(contents.size()));
}

// The matcher as it was before issue 39 (quadratic in the worst case): the
// reference the new one must agree with.
char lowerRef(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }

bool referenceMatch(std::string_view p, std::string_view s)
{
    if (p.find_first_of("*?") == std::string_view::npos) {
        if (p.size() > s.size())
            return false;
        for (size_t i = 0; i + p.size() <= s.size(); ++i) {
            size_t k = 0;
            while (k < p.size() && lowerRef(s[i + k]) == lowerRef(p[k]))
                ++k;
            if (k == p.size())
                return true;
        }
        return false;
    }
    size_t pi = 0, si = 0, starP = std::string_view::npos, starS = 0;
    while (si < s.size()) {
        if (pi < p.size() && (p[pi] == '?' || lowerRef(p[pi]) == lowerRef(s[si]))) {
            ++pi;
            ++si;
        } else if (pi < p.size() && p[pi] == '*') {
            starP = pi++;
            starS = si;
        } else if (starP != std::string_view::npos) {
            pi = starP + 1;
            si = ++starS;
        } else {
            return false;
        }
    }
    while (pi < p.size() && p[pi] == '*')
        ++pi;
    return pi == p.size();
}

std::string ruleError(const std::string& text)
{
    try {
        CommRules::fromText(text, "r.txt");
    } catch (const Error& e) {
        return e.what();
    }
    return {};
}

// One rank's Kineto trace: ProfilerStep#4 and #5 on the CPU, two kernels in
// each; `step5` is the ProfilerStep#5 event's "ts" and "dur" members,
// `extra` more events.
std::string kinetoTrace(const std::string& step5, const std::string& extra = {})
{
    std::string t = "{\"distributedInfo\": {\"rank\": 0, \"world_size\": 1}, \"traceEvents\": [\n"
                    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#4\",\"pid\":1,\"tid\":1,"
                    "\"ts\":1000,\"dur\":100},\n"
                    "{\"ph\":\"X\",\"cat\":\"user_annotation\",\"name\":\"ProfilerStep#5\",\"pid\":1,\"tid\":1," +
                    step5 + "},\n";
    for (int ts : {1010, 1050, 1210, 1250})
        t += "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"pid\":0,\"tid\":7,\"ts\":" + std::to_string(ts) +
             ",\"dur\":10,\"args\":{\"device\":0,\"stream\":7}},\n";
    t += extra;
    t.resize(t.size() - 2); // the last ",\n"
    return t + "]}\n";
}

const Diagnostic* diagnostic(const Trace& t, const std::string& kind)
{
    for (const Diagnostic& d : t.diagnostics)
        if (d.kind == kind)
            return &d;
    return nullptr;
}

} // namespace

class TstHardeningRules : public QObject {
    Q_OBJECT
private slots:
    // A. The answers, literal and glob, as before.
    void patternAnswers_data()
    {
        QTest::addColumn<QString>("pattern");
        QTest::addColumn<QString>("name");
        QTest::addColumn<bool>("matches");
        auto row = [](const char* p, const char* n, bool m) {
            QTest::addRow("%s | %s", p, n) << QString::fromUtf8(p) << QString::fromUtf8(n) << m;
        };
        // No wildcard: contained anywhere, case-insensitive.
        row("mid", "xxMIDxx", true);
        row("MID", "mid", true);
        row("abc", "ab", false);
        row("aab", "aaab", true);
        row("abab", "abaabab", true);
        row("abac", "ababac", true);
        row("deep_ep", "deep_e", false);
        row("x y", "a x y b", true);
        row("nccl", "ncclDevKernel_AllReduce", true);
        row("fancy_send", "my_fancy_sen_kernel", false);
        // Wildcards: the whole name; `?` one character (byte), `*` any text.
        row("a*b?d", "AxxBcD", true);
        row("a*b?d", "AxxBD", false);
        row("a*", "ba", false);
        row("*a", "ab", false);
        row("*a*", "bab", true);
        row("a?c", "abc", true);
        row("a?c", "abcd", false);
        row("?", "", false);
        row("*", "", true);
        row("**x**", "x", true);
        row("a*a", "a", false);
        row("a*a", "aa", true);
        row("ab*ba", "aba", false);
        row("ab*ba", "abba", true);
        row("*ab*ab*", "abab", true);
        row("*ab*ab*", "aba", false);
        row("?*?", "a", false);
        row("?*?", "ab", true);
        row("*a?c*", "xxabxabc", true);
        row("*a?c*", "xxabxab", false);
        row("caf?", "caf\xc3\xa9", false);
        row("caf??", "caf\xc3\xa9", true);
        row("*deep_ep::intranode::*", "void deep_ep::intranode::dispatch<8>(int*)", true);
        row("mscclKernel_*", "xmscclKernel_Sum", false);
        row("*lamport*AllReduce*", "lamportTwoShotAllReduceKernel<float>", true);
        row("*lamport*AllReduce*", "allreduce_lamport", false);
        row("hccl*", "HCCLAllReduce", true);
    }
    void patternAnswers()
    {
        QFETCH(QString, pattern);
        QFETCH(QString, name);
        QFETCH(bool, matches);
        const std::string p = pattern.toStdString(), n = name.toStdString();
        QCOMPARE(commPatternMatches(p, n), matches);
        QCOMPARE(referenceMatch(p, n), matches);
    }
    // Every small pattern and name over a few letters: the same answer as the
    // old matcher. Longer ones, mostly one letter, reach the linear searches.
    void sameAnswersAsBefore()
    {
        std::mt19937 rng(39);
        const char patternChars[] = "aAbB*?";
        const char nameChars[] = "aAbB";
        int agreed = 0, matched = 0;
        for (int i = 0; i < 200'000; ++i) {
            std::string p, s;
            const unsigned alphabet = i % 3 == 0 ? 4 : 6; // a third without wildcards
            for (unsigned k = rng() % 9; k > 0; --k)
                p += patternChars[rng() % alphabet];
            for (unsigned k = rng() % 14; k > 0; --k)
                s += nameChars[rng() % 4];
            const bool expected = referenceMatch(p, s);
            if (commPatternMatches(p, s) != expected)
                QFAIL(qPrintable(QString::fromStdString("'" + p + "' against '" + s + "'")));
            ++agreed;
            matched += expected;
        }
        for (int i = 0; i < 2'000; ++i) {
            std::string p, s;
            for (unsigned k = 1 + rng() % 150; k > 0; --k) {
                const unsigned r = rng() % 100;
                p += r < 90 ? 'a' : r < 95 ? '?' : r < 98 ? '*' : 'b';
            }
            for (unsigned k = rng() % 3000; k > 0; --k)
                s += rng() % 200 == 0 ? 'b' : rng() % 2 ? 'a' : 'A';
            if (commPatternMatches(p, s) != referenceMatch(p, s))
                QFAIL(qPrintable(QString("long case %1: pattern of %2, name of %3").arg(i).arg(p.size()).arg(s.size())));
            ++agreed;
        }
        QCOMPARE(agreed, 202'000);
        QVERIFY(matched > 10'000); // both answers well represented
    }
    // The reported case: 4,096-character rules against a 1 MiB name whose
    // every place is a long partial match. Correct answers (no timing here:
    // each is milliseconds now, the literal took seconds).
    void longRuleAgainstLongName()
    {
        const std::string allA(size_t{1} << 20, 'a');
        std::string endsInB = allA;
        endsInB.back() = 'b';
        std::string bInside = allA;
        bInside[600'000] = 'B';
        const std::string literal = std::string(4095, 'a') + "b";
        QCOMPARE(literal.size(), size_t(4096));
        QCOMPARE(commPatternMatches(literal, allA), false);
        QCOMPARE(commPatternMatches(literal, endsInB), true);
        QCOMPARE(commPatternMatches(literal, bInside), true);
        QCOMPARE(commPatternMatches(literal, bInside.substr(0, 600'000)), false);
        QCOMPARE(commPatternMatches(literal, bInside.substr(600'000 - 4094)), false);
        QCOMPARE(commPatternMatches(literal, bInside.substr(600'000 - 4095)), true);
        const std::string glob = "*" + literal + "*";
        QCOMPARE(commPatternMatches(glob, allA), false);
        QCOMPARE(commPatternMatches(glob, bInside), true);
        QCOMPARE(commPatternMatches("*" + literal, bInside), false);
        QCOMPARE(commPatternMatches("*" + literal, endsInB), true);
        const std::string wild = "*" + std::string(2047, 'a') + "?" + std::string(2045, 'a') + "b*";
        QCOMPARE(wild.size(), size_t(4096));
        QCOMPARE(commPatternMatches(wild, allA), false);
        QCOMPARE(commPatternMatches(wild, bInside), true);
        std::string stars;
        for (int i = 0; i < 2048; ++i)
            stars += "*a";
        QCOMPARE(commPatternMatches(stars + "b", allA), false);
        QCOMPARE(commPatternMatches(stars + "b", endsInB), true);

        // Twenty such rules in a file: only the last matches.
        std::string text;
        for (int i = 0; i < 19; ++i)
            text += "all-to-all " + std::string(4095, 'a') + "c\n";
        text += "all-reduce " + literal + "\n";
        const CommRules rules = CommRules::fromText(text, "r.txt");
        QCOMPARE(rules.rules().size(), 20 + CommRules::builtIn().rules().size());
        QVERIFY(!rules.match(allA));
        QVERIFY(!rules.matchUser(allA));
        const auto m = rules.matchUser(bInside);
        QVERIFY(m);
        QCOMPARE(static_cast<int>(m->cls), static_cast<int>(WorkClass::Collective));
        QCOMPARE(std::string(m->op), std::string("AllReduce"));
        QCOMPARE(std::string(m->family), std::string("rule file r.txt line 20"));
    }

    // B. A UTF-8 byte-order mark and CR LF line ends.
    void byteOrderMarkAndCrLf()
    {
        QTemporaryDir dir;
        const std::string file = path(dir, "rules.txt");
        writeFile(file, "\xEF\xBB\xBF" "all-to-all *my_ep::dispatch*\r\n"
                        "# a comment\r\n"
                        "\r\n"
                        "compute   nvshmem_gemm \r\n");
        const CommRules rules = CommRules::fromFile(file);
        QCOMPARE(rules.rules().size(), 2 + CommRules::builtIn().rules().size());
        QCOMPARE(rules.rules()[0].pattern, std::string("*my_ep::dispatch*"));
        QCOMPARE(rules.rules()[0].op, std::string("AllToAll"));
        QCOMPARE(rules.rules()[1].pattern, std::string("nvshmem_gemm"));
        QCOMPARE(static_cast<int>(rules.rules()[1].cls), static_cast<int>(WorkClass::Compute));
        const auto m = rules.match("void my_ep::dispatch<4>(int*)");
        QVERIFY(m);
        QCOMPARE(std::string(m->family), "rule file " + file + " line 1");
        const auto c = rules.match("nvshmem_gemm_fused");
        QVERIFY(c);
        QCOMPARE(static_cast<int>(c->cls), static_cast<int>(WorkClass::Compute));
        QCOMPARE(std::string(c->family), "rule file " + file + " line 4");

        // Mistakes are still named by line, the mark not counted as text.
        QCOMPARE(ruleError("\xEF\xBB\xBF" "bogus *x*\r\n"),
                 std::string("r.txt line 1: unknown class 'bogus'; use collective, all-to-all, all-reduce, all-gather, "
                             "reduce-scatter, p2p, compute or memcpy"));
        QCOMPARE(ruleError("\xEF\xBB\xBF" "all-to-all *x*\r\ncollective\r\n"),
                 std::string("r.txt line 2: 'collective' is not CLASS PATTERN (e.g. `all-to-all *my_ep::dispatch*`)"));
        // UTF-16 is said to be UTF-16.
        QCOMPARE(ruleError(std::string("\xFF\xFE" "c\0o\0", 6)),
                 std::string("r.txt: the file is UTF-16 text; save it as UTF-8 (one rule a line, CLASS PATTERN)"));
    }

    // C. A damaged ProfilerStep#5: counted as a bad record like a damaged
    // kernel, and named, while the analysis finds one iteration.
    void damagedIterationMarkerIsNamed()
    {
        QTemporaryDir dir;
        const std::string good = path(dir, "good.json");
        writeFile(good, kinetoTrace("\"ts\":1200,\"dur\":100"));
        const Trace whole = importAndLoad({good}, dir, "good.pipescope");
        QCOMPARE(whole.cpuRanges.size(), size_t(2));
        QVERIFY(!diagnostic(whole, "bad_value:ts"));
        QVERIFY(!diagnostic(whole, "skipped:iteration_marker"));
        QCOMPARE(analyze(whole).iterations.size(), size_t(2));

        const std::string bad = path(dir, "bad.json");
        writeFile(bad, kinetoTrace("\"ts\":9000000000000000,\"dur\":100",
                                   "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"late\",\"pid\":0,\"tid\":7,"
                                   "\"ts\":-9000000000000000,\"dur\":10,\"args\":{\"device\":0,\"stream\":7}},\n"));
        const Trace damaged = importAndLoad({bad}, dir, "bad.pipescope");
        QCOMPARE(damaged.cpuRanges.size(), size_t(1));
        QCOMPARE(damaged.activities.size(), size_t(4));
        const Diagnostic* ts = diagnostic(damaged, "bad_value:ts");
        QVERIFY(ts);
        QCOMPARE(ts->count, int64_t(2)); // the CPU range and the kernel alike
        QCOMPARE(static_cast<int>(ts->severity), static_cast<int>(Severity::Warning));
        QCOMPARE(ts->example, bad + ": an event outside the representable time range was skipped");
        const Diagnostic* marker = diagnostic(damaged, "skipped:iteration_marker");
        QVERIFY(marker);
        QCOMPARE(marker->count, int64_t(1));
        QCOMPARE(static_cast<int>(marker->severity), static_cast<int>(Severity::Info));
        QCOMPARE(marker->example, bad + ": the iteration marker \"ProfilerStep#5\" was skipped (its time lies outside the "
                                        "representable range); iterations are found without it");
        const AnalysisResult r = analyze(damaged);
        QCOMPARE(r.iterations.size(), size_t(1));
        QCOMPARE(r.iterations[0].label, std::string("ProfilerStep#4"));

        // Other damage to the marker is named too, with its reason.
        const std::string noDur = path(dir, "nodur.json");
        writeFile(noDur, kinetoTrace("\"ts\":1200,\"dur\":-5"));
        const Trace negative = importAndLoad({noDur}, dir, "nodur.pipescope");
        const Diagnostic* n = diagnostic(negative, "negative_duration");
        QVERIFY(n);
        QCOMPARE(n->count, int64_t(1));
        const Diagnostic* m = diagnostic(negative, "skipped:iteration_marker");
        QVERIFY(m);
        QCOMPARE(m->example, noDur + ": the iteration marker \"ProfilerStep#5\" was skipped (its \"dur\" is negative); "
                                     "iterations are found without it");
    }
};

QTEST_GUILESS_MAIN(TstHardeningRules)
#include "tst_hardening_rules.moc"
