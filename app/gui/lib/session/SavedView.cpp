#include "session/SavedView.h"

#include "model/Trace.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QRegularExpression>
#include <QSaveFile>

#include <limits>

namespace pipescope::gui {

namespace {

constexpr auto kFormat = "pipescope-view";
constexpr int kVersion = 2; // 2: the job's stamp and the what-if scenario
constexpr qint64 kMaxViewFileBytes = 4 << 20;

// A folder holding job.json: a sharded job, which nothing is written into.
bool insideJobFolder(const QString& absolutePath)
{
    for (QDir d = QFileInfo(absolutePath).dir(); ; ) {
        if (QFileInfo::exists(d.filePath(QStringLiteral("job.json"))))
            return true;
        if (!d.cdUp())
            return false;
    }
}

// A whole number of ns from JSON: integers only, exactly.
bool readNs(const QJsonValue& v, qint64* out)
{
    if (!v.isDouble())
        return false;
    const double d = v.toDouble();
    const qint64 i = v.toInteger(std::numeric_limits<qint64>::min());
    if (i == std::numeric_limits<qint64>::min() || static_cast<double>(i) != d)
        return false;
    *out = i;
    return true;
}

// A whole number in [lo, hi] from JSON.
bool readInt(const QJsonValue& v, qint64 lo, qint64 hi, qint64* out)
{
    return readNs(v, out) && *out >= lo && *out <= hi;
}

std::optional<JobStamp> jobFromJson(const QJsonValue& v)
{
    const QJsonObject o = v.toObject();
    JobStamp j;
    if (!v.isObject() || !readInt(o.value(QStringLiteral("ranks")), 0, std::numeric_limits<int>::max(), &j.ranks)
        || !readInt(o.value(QStringLiteral("activities")), 0, std::numeric_limits<qint64>::max(), &j.activities))
        return std::nullopt;
    return j;
}

// The scenario's fields, each of its JSON type and in range; whether it fits
// the job is for the editor to say (scenarioFitting).
std::optional<KeptScenario> scenarioFromJson(const QJsonValue& v)
{
    if (!v.isObject())
        return std::nullopt;
    const QJsonObject o = v.toObject();
    KeptScenario k;
    qint64 layers = 0, pp = 0, chunks = 0, m = 0;
    constexpr qint64 kMaxInt = std::numeric_limits<int>::max();
    if (!readInt(o.value(QStringLiteral("layers")), 1, kMaxInt, &layers) || !readInt(o.value(QStringLiteral("pp")), 1, kMaxInt, &pp)
        || !readInt(o.value(QStringLiteral("v")), 1, kMaxInt, &chunks) || !readInt(o.value(QStringLiteral("microbatches")), 1, kMaxInt, &m)
        || !o.value(QStringLiteral("schedule")).isString() || !o.value(QStringLiteral("microbatchOrder")).isString()
        || !o.value(QStringLiteral("recompute")).isString() || !o.value(QStringLiteral("boundaries")).isArray()
        || !o.value(QStringLiteral("stageSpeeds")).isArray() || !o.value(QStringLiteral("extraWorkMs")).isDouble())
        return std::nullopt;
    k.layers = static_cast<int>(layers);
    k.pp = static_cast<int>(pp);
    k.v = static_cast<int>(chunks);
    k.microbatches = static_cast<int>(m);
    k.schedule = o.value(QStringLiteral("schedule")).toString();
    k.microbatchOrder = o.value(QStringLiteral("microbatchOrder")).toString();
    k.recompute = o.value(QStringLiteral("recompute")).toString();
    k.extraWorkMs = o.value(QStringLiteral("extraWorkMs")).toDouble();
    for (const QJsonValue& b : o.value(QStringLiteral("boundaries")).toArray()) {
        qint64 layer = 0;
        if (!readInt(b, 0, kMaxInt, &layer))
            return std::nullopt;
        k.boundaries << static_cast<int>(layer);
    }
    for (const QJsonValue& s : o.value(QStringLiteral("stageSpeeds")).toArray()) {
        if (!s.isDouble())
            return std::nullopt;
        k.stageSpeeds << s.toDouble();
    }
    if (o.contains(QStringLiteral("gpuMemoryBytes"))) {
        qint64 bytes = 0;
        if (!readInt(o.value(QStringLiteral("gpuMemoryBytes")), 1, std::numeric_limits<qint64>::max(), &bytes))
            return std::nullopt;
        k.gpuMemoryBytes = bytes;
    }
    return k;
}

QJsonObject scenarioToJson(const KeptScenario& k)
{
    QJsonArray boundaries, speeds;
    for (int b : k.boundaries)
        boundaries.append(b);
    for (double s : k.stageSpeeds)
        speeds.append(s);
    QJsonObject o{{QStringLiteral("layers"), k.layers},
                  {QStringLiteral("schedule"), k.schedule},
                  {QStringLiteral("pp"), k.pp},
                  {QStringLiteral("v"), k.v},
                  {QStringLiteral("microbatches"), k.microbatches},
                  {QStringLiteral("boundaries"), boundaries},
                  {QStringLiteral("microbatchOrder"), k.microbatchOrder},
                  {QStringLiteral("recompute"), k.recompute},
                  {QStringLiteral("stageSpeeds"), speeds},
                  {QStringLiteral("extraWorkMs"), k.extraWorkMs}};
    if (k.gpuMemoryBytes)
        o[QStringLiteral("gpuMemoryBytes")] = *k.gpuMemoryBytes;
    return o;
}

std::optional<SavedView> fromJson(const QJsonObject& o, QString* why)
{
    SavedView v;
    if (o.value(QStringLiteral("format")).toString() != QLatin1String(kFormat)) {
        *why = QStringLiteral("not a pipescope view");
        return std::nullopt;
    }
    const int version = o.value(QStringLiteral("version")).toInt(-1);
    if (version != 1 && version != kVersion) {
        *why = QStringLiteral("a view of another version");
        return std::nullopt;
    }
    const QJsonObject range = o.value(QStringLiteral("range")).toObject();
    if (!readNs(range.value(QStringLiteral("from")), &v.fromNs) || !readNs(range.value(QStringLiteral("to")), &v.toNs)
        || v.toNs <= v.fromNs) {
        *why = QStringLiteral("no visible range");
        return std::nullopt;
    }
    if (o.contains(QStringLiteral("origin"))) {
        const QJsonObject origin = o.value(QStringLiteral("origin")).toObject();
        qint64 ns = 0;
        if (!readNs(origin.value(QStringLiteral("ns")), &ns)) {
            *why = QStringLiteral("a bad time origin");
            return std::nullopt;
        }
        v.originNs = ns;
        v.originName = origin.value(QStringLiteral("name")).toString();
    }
    for (const QJsonValue& p : o.value(QStringLiteral("pinned")).toArray()) {
        if (!p.isString()) {
            *why = QStringLiteral("a bad pinned track");
            return std::nullopt;
        }
        v.pinned << p.toString();
    }
    for (const QJsonValue& m : o.value(QStringLiteral("markers")).toArray()) {
        SavedView::Marker marker;
        if (!m.isObject() || !readNs(m.toObject().value(QStringLiteral("ns")), &marker.ns)) {
            *why = QStringLiteral("a bad marker");
            return std::nullopt;
        }
        marker.label = m.toObject().value(QStringLiteral("label")).toString();
        v.markers << marker;
    }
    for (const QJsonValue& n : o.value(QStringLiteral("notes")).toArray()) {
        SavedView::Note note;
        const QJsonObject no = n.toObject();
        if (!readNs(no.value(QStringLiteral("from")), &note.fromNs) || !readNs(no.value(QStringLiteral("to")), &note.toNs)
            || note.toNs < note.fromNs) {
            *why = QStringLiteral("a bad note");
            return std::nullopt;
        }
        note.text = no.value(QStringLiteral("text")).toString();
        v.notes << note;
    }
    const QJsonValue it = o.value(QStringLiteral("iteration"));
    if (!it.isUndefined() && (!it.isDouble() || it.toInt(-2) < -1)) {
        *why = QStringLiteral("a bad iteration");
        return std::nullopt;
    }
    v.iteration = it.isUndefined() ? -1 : it.toInt();
    if (o.contains(QStringLiteral("job")) && !(v.job = jobFromJson(o.value(QStringLiteral("job"))))) {
        *why = QStringLiteral("a bad job");
        return std::nullopt;
    }
    if (o.contains(QStringLiteral("whatIf")) && !(v.whatIf = scenarioFromJson(o.value(QStringLiteral("whatIf"))))) {
        *why = QStringLiteral("a bad what-if scenario");
        return std::nullopt;
    }
    return v;
}

QJsonObject toJson(const SavedView& v)
{
    QJsonObject o;
    o[QStringLiteral("format")] = QLatin1String(kFormat);
    o[QStringLiteral("version")] = kVersion;
    o[QStringLiteral("timesFrom")] = QStringLiteral("the job start, in ns");
    o[QStringLiteral("range")] = QJsonObject{{QStringLiteral("from"), v.fromNs}, {QStringLiteral("to"), v.toNs}};
    if (v.originNs)
        o[QStringLiteral("origin")] = QJsonObject{{QStringLiteral("ns"), *v.originNs}, {QStringLiteral("name"), v.originName}};
    o[QStringLiteral("pinned")] = QJsonArray::fromStringList(v.pinned);
    QJsonArray markers, notes;
    for (const SavedView::Marker& m : v.markers)
        markers.append(QJsonObject{{QStringLiteral("ns"), m.ns}, {QStringLiteral("label"), m.label}});
    for (const SavedView::Note& n : v.notes)
        notes.append(QJsonObject{{QStringLiteral("from"), n.fromNs}, {QStringLiteral("to"), n.toNs}, {QStringLiteral("text"), n.text}});
    o[QStringLiteral("markers")] = markers;
    o[QStringLiteral("notes")] = notes;
    o[QStringLiteral("iteration")] = v.iteration;
    if (v.job)
        o[QStringLiteral("job")] = QJsonObject{{QStringLiteral("ranks"), v.job->ranks}, {QStringLiteral("activities"), v.job->activities}};
    if (v.whatIf)
        o[QStringLiteral("whatIf")] = scenarioToJson(*v.whatIf);
    return o;
}

struct Unit {
    const char* name;
    qint64 ns;
    int digits; // decimals down to 1 ns
};
constexpr Unit kUnits[] = {{"s", 1'000'000'000, 9}, {"ms", 1'000'000, 6}, {"us", 1'000, 3}, {"ns", 1, 0}};

std::optional<qint64> parseTime(const QString& text, QString* error)
{
    static const QRegularExpression re(QStringLiteral("^\\s*(-?)(\\d+)(?:\\.(\\d+))?\\s*(s|ms|us|µs|ns)?\\s*$"));
    const auto m = re.match(text);
    if (!m.hasMatch()) {
        *error = QStringLiteral("'%1' is not a time (write it as 1.25s, 250ms, 12us or 1500ns)").arg(text.trimmed());
        return std::nullopt;
    }
    QString unitName = m.captured(4);
    if (unitName == QStringLiteral("µs"))
        unitName = QStringLiteral("us");
    Unit unit = kUnits[3];
    for (const Unit& u : kUnits)
        if (unitName == QLatin1String(u.name))
            unit = u;
    QString frac = m.captured(3);
    while (frac.endsWith(QLatin1Char('0')))
        frac.chop(1);
    if (frac.size() > unit.digits) {
        *error = QStringLiteral("'%1' is finer than a nanosecond").arg(text.trimmed());
        return std::nullopt;
    }
    bool ok = false;
    const qint64 whole = m.captured(2).toLongLong(&ok);
    const qint64 fracNs = frac.isEmpty() ? 0 : frac.leftJustified(unit.digits, QLatin1Char('0')).toLongLong();
    if (!ok || whole > (std::numeric_limits<qint64>::max() - fracNs) / unit.ns) {
        *error = QStringLiteral("'%1' is too large").arg(text.trimmed());
        return std::nullopt;
    }
    const qint64 ns = whole * unit.ns + fracNs;
    return m.captured(1).isEmpty() ? ns : -ns;
}

} // namespace

std::optional<JobStamp> jobStamp(const Trace& trace)
{
    if (!trace.ranksRead.empty())
        return std::nullopt; // what is read of it changes as more ranks are read
    return JobStamp{static_cast<qint64>(trace.ranks.size()), static_cast<qint64>(trace.activities.size())};
}

QString describe(const JobStamp& stamp)
{
    return QStringLiteral("%1 rank%2, %3 GPU activities").arg(stamp.ranks).arg(stamp.ranks == 1 ? "" : "s").arg(stamp.activities);
}

QString otherJobNotice(const SavedView& view, const Trace& trace, const QString& path)
{
    const std::optional<JobStamp> shown = jobStamp(trace);
    if (!view.job || !shown || *view.job == *shown)
        return {};
    return QStringLiteral("The saved view %1 was kept for another job (%2; this one has %3) and was ignored")
        .arg(QFileInfo(path).fileName(), describe(*view.job), describe(*shown));
}

QString savedViewPath(const QStringList& inputs)
{
    if (inputs.size() != 1 || inputs.front().isEmpty())
        return {};
    const QString path = QDir::cleanPath(QFileInfo(inputs.front()).absoluteFilePath());
    if (insideJobFolder(path))
        return {}; // a file or folder inside a job folder: never written into
    return path + QStringLiteral(".view.json");
}

std::optional<SavedView> readSavedView(const QString& path, QString* error)
{
    error->clear();
    QFile f(path);
    if (path.isEmpty() || !f.exists())
        return std::nullopt;
    const QString name = QFileInfo(path).fileName();
    if (!f.open(QIODevice::ReadOnly)) {
        *error = QStringLiteral("The saved view %1 could not be read (%2); the job opens as usual").arg(name, f.errorString());
        return std::nullopt;
    }
    if (f.size() > kMaxViewFileBytes) {
        *error = QStringLiteral("The saved view %1 is damaged (too large); the job opens as usual").arg(name);
        return std::nullopt;
    }
    QJsonParseError parse{};
    const QJsonDocument doc = QJsonDocument::fromJson(f.readAll(), &parse);
    QString why;
    std::optional<SavedView> v;
    if (parse.error != QJsonParseError::NoError)
        why = parse.errorString();
    else if (!doc.isObject())
        why = QStringLiteral("not a pipescope view");
    else
        v = fromJson(doc.object(), &why);
    if (!v)
        *error = QStringLiteral("The saved view %1 is damaged (%2) and was ignored; the job opens as usual").arg(name, why);
    return v;
}

bool writeSavedView(const QString& path, const SavedView& view, QString* error)
{
    error->clear();
    if (path.isEmpty()) {
        *error = QStringLiteral("The view is not kept for this job (several inputs, or a file inside a job folder)");
        return false;
    }
    QSaveFile f(path);
    const QByteArray bytes = QJsonDocument(toJson(view)).toJson(QJsonDocument::Indented);
    if (!f.open(QIODevice::WriteOnly) || f.write(bytes) != bytes.size() || !f.commit()) {
        *error = QStringLiteral("The view could not be saved to %1: %2").arg(path, f.errorString());
        return false;
    }
    return true;
}

std::optional<QPair<qint64, qint64>> parseTimeRange(const QString& text, QString* error)
{
    error->clear();
    const qsizetype dots = text.indexOf(QStringLiteral(".."));
    if (dots < 0) {
        *error = QStringLiteral("--at takes START..END, e.g. 1.25s..1.5s (got '%1')").arg(text);
        return std::nullopt;
    }
    QString why;
    const auto from = parseTime(text.left(dots), &why);
    const auto to = from ? parseTime(text.mid(dots + 2), &why) : std::nullopt;
    if (!from || !to) {
        *error = QStringLiteral("--at %1: %2").arg(text, why);
        return std::nullopt;
    }
    if (*to <= *from) {
        *error = QStringLiteral("--at %1: the end must come after the start").arg(text);
        return std::nullopt;
    }
    return QPair<qint64, qint64>(*from, *to);
}

QString formatLinkTime(qint64 ns)
{
    if (ns == 0)
        return QStringLiteral("0s");
    const bool negative = ns < 0;
    // The magnitude as unsigned, so that the smallest qint64 has one too.
    const quint64 a = negative ? quint64(0) - static_cast<quint64>(ns) : static_cast<quint64>(ns);
    Unit unit = kUnits[3];
    for (const Unit& u : kUnits)
        if (a >= static_cast<quint64>(u.ns)) {
            unit = u;
            break;
        }
    QString text = QString::number(a / static_cast<quint64>(unit.ns));
    QString frac = QString::number(a % static_cast<quint64>(unit.ns)).rightJustified(unit.digits, QLatin1Char('0'));
    while (frac.endsWith(QLatin1Char('0')))
        frac.chop(1);
    if (!frac.isEmpty())
        text += QLatin1Char('.') + frac;
    return (negative ? QStringLiteral("-") : QString()) + text + QLatin1String(unit.name);
}

QString viewLink(const QStringList& inputs, qint64 fromNs, qint64 toNs, int iteration)
{
    static const QRegularExpression plain(QStringLiteral("^[A-Za-z0-9_./+:,=@%-]+$"));
    QStringList words{QStringLiteral("pipescope-gui")};
    for (const QString& in : inputs) {
        QString p = QDir::cleanPath(QFileInfo(in).absoluteFilePath());
        if (!plain.match(p).hasMatch())
            p = QLatin1Char('\'') + p.replace(QLatin1Char('\''), QStringLiteral("'\\''")) + QLatin1Char('\'');
        words << p;
    }
    words << QStringLiteral("--at") << formatLinkTime(fromNs) + QStringLiteral("..") + formatLinkTime(toNs);
    if (iteration >= 0)
        words << QStringLiteral("--iteration") << QString::number(iteration);
    return words.join(QLatin1Char(' '));
}

} // namespace pipescope::gui
