#pragma once
// The one palette of the desktop app and the HTML report (whose stylesheet,
// core/report/ReportCss.cpp, carries the same values as CSS variables):
// step kinds, bubble causes and work classes. Built on Tableau 10, which
// stays distinguishable under the common colour-vision deficiencies; the
// report has no colours of its own for copies, memsets, syncs and other
// work, so those take the palette's remaining hues.
#include "analysis/Analysis.h"

#include <array>
#include <cstdint>
#include <string_view>

namespace pipescope::timeline {

struct Rgb {
    uint8_t r = 0, g = 0, b = 0;
};

constexpr Rgb rgbFromHex(std::string_view hex)
{
    auto nib = [](char c) -> int { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : 0; };
    auto byte = [&](size_t i) { return static_cast<uint8_t>(nib(hex[i]) * 16 + nib(hex[i + 1])); };
    return hex.size() == 7 ? Rgb{byte(1), byte(3), byte(5)} : Rgb{};
}

// Indexed by StepKind: F, B, I, W (report: --k-F ... --k-W).
inline constexpr std::array<std::string_view, 4> kStepHex = {"#4e79a7", "#59a14f", "#76b7b2", "#b6992d"};
// Indexed by BubbleCause (report: --c-fill_drain ... --c-other).
inline constexpr std::array<std::string_view, kBubbleCauses> kCauseHex = {"#e15759", "#f28e2b", "#b07aa1", "#9c755f",
                                                                          "#86bcb6", "#ff9da7", "#d4a6c8",
                                                                          "#8f8f8f", "#d4c9be"};
// Indexed by WorkClass: compute (report: --busy), p2p (--m-p2p), collective
// (--m-collective), memcpy, memset, sync, other.
inline constexpr std::array<std::string_view, 7> kClassHex = {"#c9ced6", "#8a5cc2", "#17a2b8", "#edc948",
                                                              "#f1ce63", "#6a737d", "#bab0ac"};
// CPU annotation ranges, iteration boundaries, search hits, selection.
inline constexpr std::string_view kCpuHex = "#a0cbe8";
inline constexpr std::string_view kIterationHex = "#1d2329";
inline constexpr std::string_view kHighlightHex = "#ffbf00";
inline constexpr std::string_view kSelectionHex = "#0969da";
inline constexpr std::string_view kTextHex = "#1d2329";
// A comparison's changes: less time in the compared run, and more (the report's td.faster / td.slower).
inline constexpr std::string_view kFasterHex = "#1e7d32";
inline constexpr std::string_view kSlowerHex = "#b3261e";

constexpr Rgb stepColor(StepKind k) { return rgbFromHex(kStepHex[static_cast<size_t>(k) & 3]); }
constexpr Rgb causeColor(BubbleCause c)
{
    return rgbFromHex(kCauseHex[static_cast<size_t>(c) < kCauseHex.size() ? static_cast<size_t>(c) : kCauseHex.size() - 1]);
}
constexpr Rgb classColor(WorkClass c)
{
    return rgbFromHex(kClassHex[static_cast<size_t>(c) < kClassHex.size() ? static_cast<size_t>(c) : kClassHex.size() - 1]);
}

// Neighbouring microbatches of one step kind alternate between the colour and
// a lighter tint, so adjacent blocks stay apart without new hues.
constexpr Rgb microbatchTint(Rgb c, int microbatch)
{
    if (microbatch < 0 || microbatch % 2 == 0)
        return c;
    auto up = [](uint8_t v) { return static_cast<uint8_t>(v + (255 - v) * 30 / 100); };
    return Rgb{up(c.r), up(c.g), up(c.b)};
}

} // namespace pipescope::timeline
