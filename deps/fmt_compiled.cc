// fmt's compiled part, built from the headers of Debian's libfmt-dev (deps/README.md). Without
// FMT_HEADER_ONLY, fmt/format.h declares fmt's non-template functions and a few templates
// (`extern template` there) without defining them; their definitions are in fmt/format-inl.h,
// included here and nowhere else, so they are compiled once instead of in every file that formats.
#include <fmt/format-inl.h>

#include <locale>

FMT_BEGIN_NAMESPACE
namespace detail {
// What format.h declares `extern template`, for the two character types it names.
template auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template auto thousands_sep_impl<wchar_t>(locale_ref) -> thousands_sep_result<wchar_t>;
template auto decimal_point_impl<char>(locale_ref) -> char;
template auto decimal_point_impl<wchar_t>(locale_ref) -> wchar_t;
// Declared in the headers, defined in format-inl.h only: the locale of the `L` flag, and the
// shortest decimal form of a float or double.
template locale_ref::locale_ref(const std::locale&);
template auto locale_ref::get<std::locale>() const -> std::locale;
template auto dragonbox::to_decimal<float>(float) noexcept -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal<double>(double) noexcept -> dragonbox::decimal_fp<double>;
}  // namespace detail
FMT_END_NAMESPACE
