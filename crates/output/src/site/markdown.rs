//! Markdown (study READMEs, sweeps' `results.md`) to HTML for the site, with every
//! local link and image made to resolve inside the site.
//!
//! A relative link or image whose file exists beside the Markdown is copied into the
//! site at the same relative place and kept; a link to a PNG becomes the image itself
//! (a sweep's `results.md` lists its plots as links). A link to something that is
//! not there, or off this machine, keeps its text and loses the link (the URL is shown
//! after it), so the site holds no dead links and needs no network. Raw HTML in the
//! Markdown is shown as text, not obeyed.

use std::io;
use std::path::{Component, Path};

use pulldown_cmark::{CowStr, Event, HeadingLevel, LinkType, Options, Parser, Tag, TagEnd};

/// Where the Markdown comes from and where its files go.
pub struct Place<'a> {
    /// The folder relative links are resolved against.
    pub src: &'a Path,
    /// The folder of the site they are copied into (same relative paths).
    pub dst: &'a Path,
    /// Added to each kept link, for a page that is not in `dst` itself ("" or
    /// "sweep/").
    pub prefix: &'a str,
}

/// How a link's opening tag was rewritten, so its closing tag follows suit.
enum Kept {
    Link,
    Image,
    Dropped(String),
}

/// Renders `md` with headings moved down `shift` levels.
pub fn render(md: &str, place: &Place<'_>, shift: u8) -> io::Result<String> {
    let mut open: Vec<Kept> = vec![];
    let mut events: Vec<Event<'_>> = vec![];
    for ev in Parser::new_ext(md, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH) {
        match ev {
            Event::Start(Tag::Heading {
                level,
                id,
                classes,
                attrs,
            }) => events.push(Event::Start(Tag::Heading {
                level: lower(level, shift),
                id,
                classes,
                attrs,
            })),
            Event::End(TagEnd::Heading(level)) => {
                events.push(Event::End(TagEnd::Heading(lower(level, shift))))
            }
            Event::Start(Tag::Link {
                dest_url, title, ..
            }) => open_tag(place, &mut open, &mut events, dest_url, title, false)?,
            Event::Start(Tag::Image {
                dest_url, title, ..
            }) => open_tag(place, &mut open, &mut events, dest_url, title, true)?,
            Event::End(TagEnd::Link | TagEnd::Image) => match open.pop() {
                Some(Kept::Link) => events.push(Event::End(TagEnd::Link)),
                Some(Kept::Image) => events.push(Event::End(TagEnd::Image)),
                Some(Kept::Dropped(url)) if is_remote(&url) => {
                    events.push(Event::Text(format!(" ({url})").into()))
                }
                _ => {}
            },
            Event::Html(h) | Event::InlineHtml(h) => events.push(Event::Text(h)),
            other => events.push(other),
        }
    }
    let mut html = String::new();
    pulldown_cmark::html::push_html(&mut html, events.into_iter());
    Ok(html)
}

/// Opens a link or an image at its site URL (a link to a PNG becomes the image), or
/// drops the tag, keeping its text, when its target is not in the site.
fn open_tag<'a>(
    place: &Place<'_>,
    open: &mut Vec<Kept>,
    events: &mut Vec<Event<'a>>,
    dest_url: CowStr<'a>,
    title: CowStr<'a>,
    image: bool,
) -> io::Result<()> {
    let Some(url) = local(place, &dest_url)? else {
        open.push(Kept::Dropped(dest_url.into_string()));
        return Ok(());
    };
    let (link_type, id, dest_url) = (LinkType::Inline, CowStr::Borrowed(""), url.clone().into());
    let tag = if image || url.ends_with(".png") {
        open.push(Kept::Image);
        Tag::Image {
            link_type,
            dest_url,
            title,
            id,
        }
    } else {
        open.push(Kept::Link);
        Tag::Link {
            link_type,
            dest_url,
            title,
            id,
        }
    };
    events.push(Event::Start(tag));
    Ok(())
}

fn lower(level: HeadingLevel, shift: u8) -> HeadingLevel {
    let n = (level as u8 + shift).min(6);
    HeadingLevel::try_from(usize::from(n)).unwrap_or(HeadingLevel::H6)
}

fn is_remote(url: &str) -> bool {
    url.contains("://") || url.starts_with("mailto:")
}

/// The site URL of a relative link whose file exists under `place.src` (copied into
/// `place.dst`), or `None` for anything else: remote, absolute, anchors, `..`, or
/// missing.
fn local(place: &Place<'_>, url: &str) -> io::Result<Option<String>> {
    if url.is_empty() || is_remote(url) || url.starts_with('#') || url.starts_with('/') {
        return Ok(None);
    }
    let path = Path::new(url);
    if !path
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Ok(None);
    }
    let from = place.src.join(path);
    if !from.is_file() {
        return Ok(None);
    }
    let to = place.dst.join(path);
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::copy(&from, &to)?;
    Ok(Some(format!("{}{}", place.prefix, url)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_resolve_inside_the_site_or_are_dropped() {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        std::fs::create_dir(src.path().join("plots")).unwrap();
        std::fs::write(src.path().join("plots/a.png"), b"png").unwrap();
        std::fs::write(src.path().join("sweep.csv"), b"x").unwrap();
        let md = "# Title\n\n- [plots/a.png](plots/a.png)\n- [the table](sweep.csv)\n\
                  - [gone](missing.md) and [up](../secret) and [web](https://example.org/x)\n\n\
                  <script>alert(1)</script>\n";
        let place = Place {
            src: src.path(),
            dst: dst.path(),
            prefix: "s/",
        };
        let html = render(md, &place, 1).unwrap();
        assert!(html.contains("<h2>Title</h2>"), "{html}");
        assert!(
            html.contains(r#"<img src="s/plots/a.png" alt="plots/a.png""#),
            "{html}"
        );
        assert!(
            html.contains(r#"<a href="s/sweep.csv">the table</a>"#),
            "{html}"
        );
        assert!(
            html.contains("gone and up and web (https://example.org/x)"),
            "{html}"
        );
        assert!(
            !html.contains("missing.md") && !html.contains("secret"),
            "{html}"
        );
        assert!(
            !html.contains("<script>") && html.contains("&lt;script&gt;"),
            "{html}"
        );
        assert_eq!(
            std::fs::read(dst.path().join("plots/a.png")).unwrap(),
            b"png"
        );
        assert!(dst.path().join("sweep.csv").is_file());
    }
}
