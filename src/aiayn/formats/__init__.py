"""Files with more than text: HTML (`html`), gettext PO (`po`), XLIFF (`xliff`), SRT and WebVTT
subtitles (`subtitles`), translated with their markup, placeholders, structure and timings kept.
Markup is carried through the model's word alignments (`inline`, `segments`)."""
